/* SPDX-License-Identifier: MIT */
/*
 * The capture engine's insides, shared by its two files (never included
 * outside vmm/profile/capture*.c):
 *   capture.c       the engine, and one capture: the task read twice
 *                   around its kernel stack, kept or discarded
 *   capture_user.c  the user part: what an address space runs (its
 *                   executable, its code mappings and their objects), its
 *                   user stack, the pcs tagged by object, the ranges to
 *                   have the guest read, and the process's name and labels
 */
#ifndef IVM_CAPTURE_INT_H
#define IVM_CAPTURE_INT_H

#include "base/assoc.h"
#include "kernel/gfile.h"
#include "kernel/mm_maps.h"
#include "profile/capture.h"
#include "unwind/kunwind.h"
#include "unwind/uunwind_exe.h"

#define MM_CACHE_SLOTS 256
/* Files told apart by identity, each with its object (or none). */
#define MAX_FILES 4096

/*
 * An executable file mapping of an address space: the object it maps (by
 * build-id), its load bias, and a reader of the file's bytes by offset
 * through the guest (that process's mapping, the page cache, others).
 */
struct code_map {
	uint64_t start, end, pgoff, bias;
	struct ivm_guest_file file;
	struct ivm_uobject *obj;	/* NULL: no ELF object we know */
	struct ivm_gfile_file gf;	/* gf.file points at file above */
	struct ivm_kmem_reader reader;
	/* The vDSO: no file; its image is its memory (reader above). */
	const struct ivm_gfile_space *space;
};

/* A guest file seen before: which object it is (none: not_elf). */
struct file_object {
	uint64_t inode, ino, dev;
	uint32_t generation;
	struct ivm_uobject *obj;	/* NULL: not an ELF with a build-id */
};

/*
 * What an address space (mm_struct) runs, once looked up: its executable
 * as its memory shows it and the host copy for CFI.  Keyed by the mm and
 * its page-table root: exec makes a new mm, and a freed mm_struct reused
 * for another process would also need its pgd page to come back to it to
 * be taken for the old one.
 */
struct mm_binding {
	uint64_t mm, cr3;
	bool known;			/* exe was read */
	struct ivm_uexe exe;
	struct ivm_uexe_handle host;	/* slot -1: no host copy */
	const char *why;		/* static: why none */
	bool from_file;			/* headers read from the page cache */
	/* Its code mappings, from its VMAs (kernel/mm_maps.h); owned. */
	struct ivm_mm_maps *vmas;
	struct code_map *code;
	size_t nr_code;
	uint64_t maps_ns;		/* when read; 0: never */
	struct ivm_gfile_space space;	/* its VMAs and user memory */
};

/* Tasks whose mm a capture remembers: the guest's busiest threads. */
#define IVM_CAPTURE_MM_SEEN 256

struct mm_seen {
	uint64_t task, mm;
};

struct ivm_capture_engine {
	struct ivm_guest *guest;
	/* The user objects captures met, numbered (uobjects.h). */
	struct ivm_uobjects *objects;
	/* How user stacks ended (capture.h struct ivm_capture_user_stats). */
	struct ivm_capture_user_stats ustats;
	uint64_t unwinds;		/* user unwinds begun */
	/* VMAs and guest files' bytes; has_maps false when BTF lacks them. */
	bool has_maps;
	struct ivm_mm_source mm_src;
	struct ivm_gfile *gfile;
	struct ivm_gfile_user fuser;	/* user memory, fork-child safe */
	struct file_object *files;
	size_t nr_files;
	/* Host copies of guest executables, by build-id. */
	struct ivm_uexe_cache *ubins;
	size_t nr_binaries;		/* given by --binary */
	bool has_symdir;
	/* mm_struct.saved_auxv (the ELF auxiliary vector); len 0: none. */
	uint32_t auxv_off, auxv_len;
	/* Address spaces met, by mm_struct (base/assoc.h). */
	struct mm_binding mm_cache[MM_CACHE_SLOTS];
	uint64_t mm_used[MM_CACHE_SLOTS];
	struct ivm_assoc mm_assoc;
	/* ivm_capture_engine_age_maps: its last pass, the stamp then. */
	uint64_t maps_aged_ns, maps_aged_tick;
	uint64_t maps_dropped;
	uint8_t probe_page[4096];	/* a guest binary's first page */
	struct ivm_kunwind_config kcfg;
	struct ivm_switch_frame_layout switch_frame;
	uint64_t thread_size;
	struct ivm_kmem_gmem kmem;
	struct ivm_kmem_reader kmem_reader;	/* uncached */
	/*
	 * An unwind reads the same few stack pages many times, 8 bytes at a
	 * time; the cache turns those into one page walk and read per page.
	 * It is emptied before every capture: guest memory changes.
	 */
	struct ivm_kmem_cache kcache;
	struct ivm_kmem_reader kreader;
	/*
	 * Page-table entries seen by earlier captures, kernel and user: a
	 * page's walk and data then take one round trip, not five.  Only
	 * ever a prediction that each read checks (x86_64_paging.h), so it
	 * is kept across captures.
	 */
	struct ivm_x86_64_walk_memo memo;
	/* The same for the target's user memory (its own page tables). */
	struct ivm_kmem_gmem umem;
	struct ivm_kmem_cache ucache;
	struct ivm_kmem_reader ucache_reader;
	uint64_t user_task;	/* whose memory ucache holds; 0: none yet */
	/*
	 * The mm each task had at its last capture (direct-mapped by task
	 * address; a guess only): its pgd is read with the task, in the same
	 * batch (ivm_kernel_read_task_pgd), and user_pgd holds it for the
	 * capture under way when the guess held (user_pgd_mm its mm; 0: no).
	 */
	struct mm_seen mm_seen[IVM_CAPTURE_MM_SEEN];
	uint64_t user_pgd_mm, user_pgd;
	bool has_cpu_stacks;
	/* task_struct.on_cpu exists (SMP kernels): see ivm_capture_task_flags. */
	bool has_on_cpu;
	/* Process names and titles; NULL: the BTF lacks what they need. */
	struct ivm_proc_info_cache *procs;
	struct ivm_labels *labels;	/* --label values; NULL: none */
	/* ORC tables of the modules loaded when the engine was made. */
	struct ivm_kunwind_orc_range *module_orc;
	size_t nr_module_orc;
	struct ivm_cpu_stacks_layout cpu_stacks;
	/* The vDSO's object, once its headers were read. */
	struct ivm_uobject *vdso;
	/* Ranges of files to have the guest read (capture.h). */
	struct ivm_capture_readahead readaheads[IVM_CAPTURE_MAX_READAHEADS];
	size_t nr_readaheads;
};

/* The user side's (capture_user.c), for the engine and one capture. */
void capture_free_code_maps(struct mm_binding *b);
void capture_unwind_user(struct ivm_capture_engine *e,
			 const struct ivm_guest_task *task,
			 const struct ivm_x86_regs *uregs,
			 struct ivm_capture *cap);
void capture_read_context(struct ivm_capture_engine *e,
			  struct ivm_capture *cap);

/* A stack's frames and flags as the sample holds them (capture.c). */
uint16_t capture_take_frames(const struct ivm_stack *st, uint32_t first,
			     uint64_t *pcs, uint8_t *flags, uint32_t want_flag);
uint32_t capture_sample_flags(uint32_t stack_flags);

#endif /* IVM_CAPTURE_INT_H */
