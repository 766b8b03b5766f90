/* Fuzz the gem5 O3PipeView converter; its Kanata output must read back without errors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "tracekit/tracekit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_file(data, size, path, sizeof path);
	struct tk_input *in;
	struct tk_buf out;
	struct tk_gem5_result res;
	int err;

	if (fd < 0)
		return 0;
	if (tk_input_open(&in, path, NULL) == 0) {
		tk_buf_init(&out, -1, 1024);
		if (tk_gem5_to_kanata(in, &out, NULL, &res) == 0) {
			struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1 };
			struct tk_kanata_reader *r = tk_kanata_reader_new(&ro, &err);
			if (r) {
				tk_kanata_reader_feed(r, out.data, out.len, 1);
				if (tk_kanata_reader_counts(r)->errors)
					abort();
				tk_kanata_reader_free(r);
			}
		}
		tk_buf_free(&out);
		tk_input_free(in);
	}
	close(fd);
	return 0;
}
