/* SPDX-License-Identifier: MIT */
/*
 * uobjects: the user-space ELF objects (executables, shared libraries) a
 * run's samples touched, numbered so that a sample names them compactly,
 * and what the profile's metadata says about them so that a report made
 * elsewhere, from the file alone, knows every frame's object and offset.
 *
 * A user pc inside a known object is recorded as IVM_UPC(id, vaddr)
 * (sample.h): the object's number and the link-time address.  The
 * metadata says, once each (as "key: value" META items, like the kernel's
 * "ksym"):
 *   uobject  "ID BUILD-ID exec|dyn PATH"   what number ID is (PATH "-"
 *            when unknown; it is last and may hold spaces);
 *   umap     "PID ID START END PGOFF BIAS" where process PID had it
 *            (hex addresses: the executable range, its file offset, and
 *            the load bias, run-time minus link-time address);
 *   usym     "ID VADDR SIZE NAME"          a function of object ID that a
 *            frame fell in, from the guest's own symbol tables.
 * The table is bounded (IVM_UOBJECTS_MAX objects, IVM_UOBJECTS_MAX_SYMS
 * names); past that, frames stay untagged or unnamed, never wrong.
 *
 * An object's image (uimage.h: its symbol tables, CFI rows, .eh_frame
 * index) is what costs: an agent that runs for days meets every program
 * its guests run.  The images are bounded in bytes (ivm_uobjects_bound):
 * the least recently used are dropped, the object keeping its number,
 * path and announcements, and an image is made again from the guest's
 * bytes when next needed (ivm_uobjects_image, which checks the build-id
 * again).
 *
 * Not thread-safe.  Everything returned is owned by the table.
 */
#ifndef IVM_UOBJECTS_H
#define IVM_UOBJECTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "profile/sample.h"
#include "unwind/uelf.h"
#include "unwind/uimage.h"

#define IVM_UOBJECTS_MAX 4096
#define IVM_UOBJECTS_MAX_SYMS (1u << 20)
#define IVM_UOBJECT_MAX_PATH 1024
/*
 * The images' bound, per guest: web01's 87 objects held 6.1 MiB at the
 * 11th minute of a soak (CFI row caches 2.6, symbol tables 2.1) and kept
 * growing as more of them came on a stack.
 */
#define IVM_UOBJECTS_IMAGE_BYTES (6u << 20)

struct ivm_uobject {
	uint32_t id;			/* 1..IVM_UOBJECTS_MAX */
	uint8_t build_id[IVM_UELF_MAX_BUILD_ID];
	size_t build_id_len;		/* > 0 */
	bool dyn;			/* ET_DYN */
	char *path;			/* NULL: not known (yet) */
	/* The guest's bytes of it (uimage.h); NULL when none made yet. */
	struct ivm_uimage *image;
	uint64_t used;			/* the table's clock at its last use */
	/* Its CFI was asked to be read into the guest (capture.h). */
	bool readahead;
};

struct ivm_uobjects;

struct ivm_error *ivm_uobjects_create(struct ivm_uobjects **ret);
void ivm_uobjects_destroy(struct ivm_uobjects *t);

/*
 * The object with this build-id, added (announced at the next take, with
 * path if not NULL) when new; NULL when the table is full or for no
 * memory.  An object known without a path gets path (as set_path).
 */
struct ivm_uobject *ivm_uobjects_get(struct ivm_uobjects *t,
				     const uint8_t *build_id, size_t len,
				     bool dyn, const char *path);

/* The object numbered id, or NULL. */
struct ivm_uobject *ivm_uobjects_by_id(const struct ivm_uobjects *t,
				       uint32_t id);

/*
 * Give o its path (copied, at most IVM_UOBJECT_MAX_PATH bytes) if it has
 * none: an object announced before its path was known is announced again
 * with it.
 */
void ivm_uobjects_set_path(struct ivm_uobjects *t, struct ivm_uobject *o,
			   const char *path);

/* Note that process pid had o's code at [start, end). */
void ivm_uobjects_note_map(struct ivm_uobjects *t, uint32_t pid,
			   const struct ivm_uobject *o, uint64_t start,
			   uint64_t end, uint64_t pgoff, uint64_t bias);

/* Note that a frame fell in function name of o at [vaddr, vaddr + size). */
void ivm_uobjects_note_symbol(struct ivm_uobjects *t,
			      const struct ivm_uobject *o, uint64_t vaddr,
			      uint64_t size, const char *name);

/*
 * The metadata items not taken yet, in order: calls emit(ctx, key, value)
 * for each and forgets them, stopping at the first error (the items not
 * emitted stay for the next take).
 */
struct ivm_error *ivm_uobjects_take_meta(struct ivm_uobjects *t,
					 struct ivm_error *(*emit)(void *ctx,
						const char *key,
						const char *value),
					 void *ctx);

/*
 * A new file begins (a continuous run's next window): every object is
 * announced again at the next take, and each umap and usym item again
 * when next noted, so the file names its frames on its own.  Objects keep
 * their numbers.
 */
void ivm_uobjects_forget(struct ivm_uobjects *t);

/* Bytes the table and its objects' images hold. */
size_t ivm_uobjects_memory(const struct ivm_uobjects *t);

/*
 * o's image, marked used: the one it has, or one made now from the file's
 * bytes through file if they hold the same build-id (o keeps none
 * otherwise: a fault is tried again at a later call).  NULL when none.
 */
struct ivm_uimage *ivm_uobjects_image(struct ivm_uobjects *t,
				      struct ivm_uobject *o,
				      const struct ivm_kmem_reader *file);

/*
 * im, an image of o's file made elsewhere (same build-id), becomes o's if
 * o has none, else it is destroyed; o's image, if any, is marked used
 * now.  im may be NULL: o is only marked.
 */
void ivm_uobjects_adopt(struct ivm_uobjects *t, struct ivm_uobject *o,
			struct ivm_uimage *im);

/*
 * Drop the least recently used images until the images hold at most max
 * bytes (the last one used is kept, even alone past max); returns how
 * many were dropped.  Only between captures: every image pointer taken
 * from an object may be freed.
 */
size_t ivm_uobjects_bound(struct ivm_uobjects *t, size_t max);


/* What the objects' images did, summed (uimage.h), and how many. */
struct ivm_uobjects_stats {
	size_t objects, with_image;
	size_t syms;		/* names said in this window */
	size_t memory;		/* bytes held: objects, their CFI rows */
	size_t image_memory;	/* of it, the images' */
	uint64_t images_dropped;	/* over the run, by the bound */
	uint64_t row_lookups, row_hits;
	uint64_t row_faults;	/* CFI bytes the guest did not hold */
	uint64_t row_bad;
	/* Rows decoded from the file's page cache (or another's mapping). */
	uint64_t row_page_cache, row_other_mapping;
};
void ivm_uobjects_stats(const struct ivm_uobjects *t,
			struct ivm_uobjects_stats *ret);

/* ---- reading the metadata back (report) ---------------------------------- */

/*
 * Parse a "uobject" value.  *path points into value (NULL for "-").
 * IVM_ERROR_INVALID when malformed.
 */
struct ivm_error *ivm_uobject_parse(const char *value, uint32_t *id,
				    uint8_t *build_id, size_t *build_id_len,
				    bool *dyn, const char **path);

/* Parse a "usym" value; *name points into value. */
struct ivm_error *ivm_usym_parse(const char *value, uint32_t *id,
				 uint64_t *vaddr, uint64_t *size,
				 const char **name);

#endif /* IVM_UOBJECTS_H */
