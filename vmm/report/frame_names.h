/* SPDX-License-Identifier: MIT */
/*
 * frame_names: what each frame of a profile (`idlevm report`) or of a live
 * stack (`idlevm stack`) is called: one symbolizer for both, over the
 * symbols/ library and the run's metadata.
 *
 * Kernel frames: the vmlinux debuginfo (inline frames, file:line), else a
 * System.map, else the kernel symbols the profile carries ("ksym"), and
 * the guest's modules ("module", "module_sections").
 *
 * User frames tagged with an object (sample.h IVM_UPC, the "uobject"
 * metadata of profile/uobjects.h), best source first:
 *  1. debug info for the object's build-id: a --binary file with it, the
 *     symbol directory (DIR/.build-id/xx/rest, else rest.debug), or
 *     debuginfod (elfutils' libdebuginfod: DEBUGINFOD_URLS and its
 *     cache): inline frames and file:line;
 *  2. the names the guest's own symbol tables gave it ("usym"), within
 *     each function's size;
 *  3. "FILE+0xADDR": the object's file name and the link-time address,
 *     what `eu-addr2line -e FILE ADDR` takes.  Never a guessed name.
 * Untagged user frames (profiles from before objects, or a frame outside
 * every known object) are named only by a binary whose text holds them,
 * and only when the sample said which executable it ran (old profiles'
 * user_build_id label); otherwise they print as addresses.
 *
 * Return addresses are looked up at pc - 1 (the call), exact pcs at pc.
 * Not thread-safe.  Everything returned lives as long as the names.
 */
#ifndef IVM_FRAME_NAMES_H
#define IVM_FRAME_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile/sample.h"
#include "report/report.h"
#include "syms.h"

/* A run's metadata as "key: value" lines, in the order given. */
struct ivm_meta_lines {
	char **lines;
	size_t nr;
};

void ivm_meta_lines_add(struct ivm_meta_lines *m, const char *key,
			const char *value);
/* The last value of key, or NULL. */
const char *ivm_meta_lines_value(const struct ivm_meta_lines *m,
				 const char *key);
void ivm_meta_lines_free(struct ivm_meta_lines *m);

struct ivm_frame_names_config {
	const char *vmlinux;		/* NULL: the metadata's */
	const char *system_map;		/* NULL: the metadata's ksyms */
	const char *const *binaries;	/* NULL: the metadata's "binary" */
	size_t nr_binaries;
	const char *symdir;		/* NULL: the metadata's */
	const char *module_dir;		/* NULL: next to the vmlinux */
	bool debuginfod;		/* ask DEBUGINFOD_URLS's servers */
	/* One line per decision or warning, without a newline. */
	void (*log)(void *ctx, const char *msg);
	void *log_ctx;
};

struct ivm_frame_names;

/* Empty names: feed samples (old profiles), then load.  NULL: no memory. */
struct ivm_frame_names *ivm_frame_names_create(void);
void ivm_frame_names_destroy(struct ivm_frame_names *fn);

/*
 * A sample of an old profile (labels user_build_id, user_bias) with its
 * executable's frames tagged and at link-time addresses, into copy and
 * pcs (IVM_SAMPLE_MAX_FRAMES), or s itself when there is nothing to do.
 */
const struct ivm_sample *ivm_frame_names_sample(struct ivm_frame_names *fn,
						const struct ivm_sample *s,
						struct ivm_sample *copy,
						uint64_t *pcs);

/*
 * Load the symbols cfg and the metadata name (both borrowed for the
 * call; what is kept is copied).  Missing files are logged, not errors.
 */
void ivm_frame_names_load(struct ivm_frame_names *fn,
			  const struct ivm_frame_names_config *cfg,
			  const struct ivm_meta_lines *meta);

/* The symbolizer for the report writers (report.h). */
struct ivm_symbolizer ivm_frame_names_symbolizer(struct ivm_frame_names *fn);

struct ivm_mappings;

/*
 * The files the loaded metadata's frames are in (report/mappings.h): the
 * kernel ("kernel_text", "kernel_build_id"), its modules, each user object
 * (placed and named by its host copy when there is one, else by where a
 * process had its code, "umap", and its guest path, else all its
 * addresses) and each executable old profiles name.
 * What cannot be added is said once through the log hook.
 */
void ivm_frame_names_mappings(struct ivm_frame_names *fn,
			      struct ivm_mappings *maps);

/* The kernel and user symbols loaded (NULL: none), for --address. */
struct ivm_syms *ivm_frame_names_syms(struct ivm_frame_names *fn);

#endif /* IVM_FRAME_NAMES_H */
