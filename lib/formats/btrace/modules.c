/* The recorded modules' files: the one that ran, found by build-id at its recorded path,
 * among the --elf files or in --module-path directories. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracekit/btrace.h"
#include "tracekit/image.h"
#include "tracekit/symbolize.h"

/* Is PATH the file module M was loaded from? By build-id where the recorder noted one;
 * without, any readable file of that name (NAME_ONLY: the same file name) will do. */
static int module_file_is(const struct tk_btrace_module *m, const char *path, int name_only)
{
	uint8_t id[64];
	if (!m->build_id_len) {
		const char *a = strrchr(path, '/'), *b = strrchr(m->path, '/');
		return access(path, R_OK) == 0 &&
		       (!name_only || !strcmp(a ? a + 1 : path, b ? b + 1 : m->path));
	}
	int n = tk_image_elf_build_id(path, id, sizeof id);
	return n == (int)m->build_id_len && !memcmp(id, m->build_id, m->build_id_len);
}

/* The file that stands in for module M: its recorded path if that is still the file that
 * ran, else an --elf FILE or a --module-path DIR/NAME with its build-id (*PLACED: an
 * --elf FILE:BASE the user placed himself, already in the image); NULL if none. */
static const char *module_file(const struct tk_btrace_modules_opts *o,
			       const struct tk_btrace_module *m, char *buf, size_t cap, int *placed)
{
	const char *name = strrchr(m->path, '/');
	name = name ? name + 1 : m->path;
	*placed = 0;
	if (module_file_is(m, m->path, 0))
		return m->path;
	for (size_t i = 0; i < o->nelf; i++) {
		const char *colon = strrchr(o->elf[i], ':');
		char *end;
		int has_base = colon && colon[1] && (strtoull(colon + 1, &end, 0), !*end);
		snprintf(buf, cap, "%.*s", has_base ? (int)(colon - o->elf[i]) : (int)strlen(o->elf[i]), o->elf[i]);
		if (module_file_is(m, buf, 1)) {
			*placed = has_base;
			return buf;
		}
	}
	for (size_t i = 0; i < o->nmodule_path; i++) {
		snprintf(buf, cap, "%s/%s", o->module_path[i], name);
		if (module_file_is(m, buf, 1))
			return buf;
	}
	return NULL;
}

/* Why the recorded file of a module cannot stand for it (RC: its load's error, if any). */
static const char *module_trouble(const char *path, int rc)
{
	struct stat st;
	if (rc < 0)
		return "cannot be loaded";
	if (stat(path, &st) < 0)
		return "is gone";
	if (!S_ISREG(st.st_mode))   /* a FIFO or device is never read: it could block */
		return "is not a regular file";
	return "is not the file that ran (its build-id differs)";
}

int tk_btrace_load_modules(const struct tk_btrace *bt, const struct tk_btrace_modules_opts *o,
			   struct tk_image *img, struct tk_sym *sym)
{
	int missing = 0;
	for (size_t i = 0; i < tk_btrace_module_count(bt); i++) {
		const struct tk_btrace_module *m = tk_btrace_module(bt, i);
		char buf[4096];
		int placed, rc = 0;
		const char *use = module_file(o, m, buf, sizeof buf, &placed);
		/* the bias is where the ELF's address 0 went (PIE and shared objects); 0 for a
		 * fixed-address executable, which loads at its own addresses */
		if (use && !placed && img && (rc = tk_image_add_elf(img, use, m->bias, m->bias != 0)) < 0)
			use = NULL;
		if (!use) {
			missing++;
			if (!o->quiet && img)
				tk_msg(o->msg, o->ctx, TK_LOG_WARN, o->file, UINT64_MAX, "module %s %s: its code is missing, and the trace "
					 "inside it decodes as gaps (give the file that ran with --elf FILE "
					 "or --module-path DIR)", m->path,
					 module_trouble(m->path, rc));
			continue;
		}
		if (use != m->path && !o->quiet && img)
			tk_msg(o->msg, o->ctx, TK_LOG_WARN, o->file, UINT64_MAX, "module %s: read from %s (the same build-id)", m->path, use);
		if (sym && !placed)
			tk_sym_add_elf(sym, use, m->bias);
	}
	return missing;
}

