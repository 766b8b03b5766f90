/* A program built against the installed API only, linked with libtracekit.so: names the
 * format of each file (tests/oracle/abi.sh). */
#include <stdio.h>

#include <tracekit/tracekit.h>

int main(int argc, char **argv)
{
	int status = 0;
	for (int i = 1; i < argc; i++) {
		struct tk_input *in;
		struct tk_format_info fi;
		const uint8_t *p;
		size_t n;
		int rc = tk_input_open(&in, argv[i], NULL);
		if (rc >= 0 && (rc = tk_input_map(in, &p, &n)) >= 0)
			rc = tk_detect_format(p, n, &fi);
		if (rc < 0) {
			printf("%s: %s\n", argv[i], tk_strerror(rc));
			status = 1;
		} else {
			printf("%s: %s\n", argv[i], tk_format_name(fi.id));
		}
		if (in)
			tk_input_free(in);
	}
	return status;
}
