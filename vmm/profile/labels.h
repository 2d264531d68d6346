/* SPDX-License-Identifier: MIT */
/*
 * labels: business categories read from the guest's own variables at
 * sample time (`idlevm profile --label KEY=SOURCE`), so a profile can say
 * which request class, tenant or transaction type the threads that went
 * idle were working for.
 *
 * A SOURCE names a variable of the sampled thread's process:
 *   tls:SYMBOL   a __thread variable of the executable: static TLS,
 *                x86-64 variant II (the TLS block ends at the thread
 *                pointer, the fs base: task->thread.fsbase, whose first
 *                word must point to itself, as the ABI has it);
 *   var:SYMBOL   a global of the executable (at its load bias for a PIE);
 *   key:SYMBOL   the value the thread stored with pthread_setspecific()
 *                under the pthread_key_t held in SYMBOL: glibc's struct
 *                pthread (at the thread pointer), its specific[] blocks
 *                of struct pthread_key_data, checked against the key's
 *                sequence number in __pthread_keys as
 *                pthread_getspecific() does;
 * and a type suffix: :int (default; 4 bytes, signed), :u64 (8 bytes) or
 * :str (a pointer to a NUL-terminated string, at most IVM_LABEL_STR_MAX
 * bytes shown, printable ASCII, others as '?').  For key:, the value is
 * the pointer the thread stored: :int and :u64 are that pointer as a
 * number, :str the string it points to.
 *
 * SYMBOL is looked up in the executable (unwind/uelf.h): a host
 * copy (--binary, --symdir, by build-id) when the capture found one, else
 * the guest's own bytes of it (.symtab through the page cache, .dynsym).
 * glibc's layout comes from the guest's libc itself where it is a shared
 * library: the libthread_db descriptors it exports for debuggers
 * (_thread_db_pthread_specific and the others), and __pthread_keys; a
 * static executable has them only in its .symtab, if at all, and uses the
 * layout of glibc 2.36 (IVM_PTHREAD_LAYOUT_GLIBC), accepted only when the
 * thread's own struct pthread confirms it (tcbhead_t.self is the thread
 * pointer, specific[0] its first block).
 *
 * A value that cannot be read (a fault, a layout that does not check
 * out, a symbol that cannot be looked up because the guest does not hold
 * all of its tables) is the label "?" and counted, never a wrong value.
 * A process whose executable has no such symbol (another program, or a
 * stripped static one without any symbol table) gets no label.
 */
#ifndef IVM_LABELS_H
#define IVM_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/vmem.h"
#include "kernel/gfile.h"
#include "kernel/mm_maps.h"
#include "profile/profile_file.h"
#include "profile/sample.h"
#include "unwind/uelf.h"
#include "unwind/uunwind_exe.h"

#define IVM_LABELS_MAX 8		/* --label options */
#define IVM_LABEL_KEY_MAX 32		/* bytes of a KEY, NUL included */
#define IVM_LABEL_STR_MAX 64		/* bytes of a :str value shown */
#define IVM_LABEL_UNREADABLE "?"
/* The META key of each --label ("KEY=SOURCE:TYPE"), in option order. */
#define IVM_META_LABEL "label"

enum ivm_label_source {
	IVM_LABEL_TLS,
	IVM_LABEL_VAR,
	IVM_LABEL_KEY,
};

enum ivm_label_type {
	IVM_LABEL_INT,
	IVM_LABEL_U64,
	IVM_LABEL_STR,
};

struct ivm_label_spec {
	char key[IVM_LABEL_KEY_MAX];
	enum ivm_label_source source;
	char symbol[IVM_UELF_MAX_NAME];
	enum ivm_label_type type;
};

/*
 * Parse "KEY=tls|var|key:SYMBOL[:int|:u64|:str]".  KEY is letters,
 * digits, '_', '-' and '.', and none of the names samples already carry
 * (kind, thread, tid, process, pid, comm, title, user_build_id,
 * user_bias).  IVM_ERROR_INVALID saying what is wrong.
 */
struct ivm_error *ivm_label_spec_parse(const char *arg,
				       struct ivm_label_spec *ret);

/* "KEY=SOURCE:SYMBOL:TYPE" into buf; returns buf. */
char *ivm_label_spec_format(const struct ivm_label_spec *s, char *buf,
			    size_t size);

/* ---- the arithmetic, pure ------------------------------------------------- */

/*
 * Address of the variable at offset sym_offset of the executable's TLS
 * template (PT_TLS: vaddr, memsz, align) for the thread whose thread
 * pointer (fs base) is tp.  x86-64 is TLS variant II: the executable's
 * block is the first, ending at tp, at tp - off where glibc's loader
 * makes off = roundup(memsz - firstbyte, align) + firstbyte, firstbyte
 * being what p_vaddr's misalignment asks for (0 when p_vaddr is aligned,
 * as linkers make it, and then off = roundup(memsz, align), what static
 * executables use).  IVM_ERROR_INVALID when sym_offset lies outside the
 * block, align is no power of two, or the sizes overflow.
 */
struct ivm_error *ivm_tls_static_address(uint64_t tp, uint64_t tls_vaddr,
					 uint64_t tls_memsz, uint64_t tls_align,
					 uint64_t sym_offset, uint64_t *ret);

/* Where glibc keeps thread-specific data (bytes, from struct pthread). */
struct ivm_pthread_layout {
	uint32_t self;			/* tcbhead_t.self: the thread pointer */
	uint32_t specific;		/* struct pthread_key_data *specific[] */
	uint32_t level1;		/* its entries (PTHREAD_KEY_1STLEVEL_SIZE) */
	uint32_t specific_1stblock;	/* UINT32_MAX: not known */
	uint32_t sizeof_pthread;	/* 0: not known */
	uint32_t level2;		/* entries per block (2NDLEVEL_SIZE) */
	uint32_t key_data_size, key_data_seq, key_data_data;
	uint32_t keys_max;		/* entries of __pthread_keys */
	uint32_t key_struct_size, key_struct_seq;
	uint64_t keys;			/* run-time address of __pthread_keys */
};

/*
 * glibc's layout on x86-64 as glibc 2.36 (Debian 12) builds it: struct
 * pthread's specific_1stblock at 784 and specific at 1296 (checked by the
 * unit tests against Debian's libc6-dbg debug info, its libthread_db
 * descriptors and pthread_getspecific() in real programs).  keys 0.
 */
extern const struct ivm_pthread_layout ivm_pthread_layout_glibc;

/*
 * The layout from libthread_db descriptors (glibc's nptl_db: each
 * db_desc_t is three little-endian u32, bits of one element, count,
 * offset; a sizeof is one u32): pthread_specific,
 * pthread_key_data_level2_data, pthread_key_data_seq,
 * pthread_key_data_data, __pthread_keys, pthread_key_struct_seq, and
 * sizeof_pthread (4 bytes, or all zero: unknown).  keys is the run-time
 * address of __pthread_keys.  IVM_ERROR_PROTOCOL when they do not
 * describe a layout this reader can follow.
 */
struct ivm_pthread_db {
	uint8_t specific[12], level2_data[12], key_data_seq[12];
	uint8_t key_data_data[12], keys[12], key_struct_seq[12];
	uint8_t sizeof_pthread[4];
};

struct ivm_error *ivm_pthread_layout_from_db(const struct ivm_pthread_db *db,
					     uint64_t keys,
					     struct ivm_pthread_layout *ret);

/*
 * What pthread_getspecific(key) returns in the thread whose thread
 * pointer is tp, read through umem (its user memory): NULL (0) for a key
 * never set, or set under an older key of the same number (its sequence
 * number is not the key's).  IVM_ERROR_PROTOCOL when tp holds no struct
 * pthread of layout l (its TCB's first word, its header's self pointer
 * or its first block disagree), the
 * key is out of range, or l->keys is 0 (the sequence cannot be checked);
 * the reader's error for a fault.
 */
struct ivm_error *ivm_pthread_getspecific(const struct ivm_kmem_reader *umem,
					  const struct ivm_pthread_layout *l,
					  uint64_t tp, uint32_t key,
					  uint64_t *ret);

/*
 * A label's text for value (a variable's contents, or a key's pointer)
 * of type: "%d" of its low 32 bits for :int, "%llu" for :u64, and for
 * :str the string at value read through umem ("(null)" for 0), cut at
 * IVM_LABEL_STR_MAX, non-printable bytes as '?'.  The reader's error when
 * the string cannot be read.
 */
struct ivm_error *ivm_label_format(const struct ivm_kmem_reader *umem,
				   enum ivm_label_type type, uint64_t value,
				   char *buf, size_t size);

/* ---- reading labels at capture ------------------------------------------------ */

/* What the label reader reads the guest through (all borrowed). */
struct ivm_labels_guest {
	const struct ivm_mm_source *mm_src;	/* kernel memory, VMAs */
	struct ivm_gfile *gfile;		/* files' bytes; NULL: none */
	int la57;
};

/* The thread a capture is about. */
struct ivm_label_target {
	uint32_t pid, tid;
	uint64_t mm, cr3;
	uint64_t fsbase;		/* its thread pointer; 0: unknown */
	const struct ivm_uexe *exe;	/* its executable, or NULL */
	const char *host_path;		/* a host copy of it, or NULL */
	const struct ivm_kmem_reader *umem;	/* its user memory */
};

/* Counts per label, for the end of a run and its file. */
struct ivm_label_stats {
	uint64_t read;		/* samples with a value */
	uint64_t unreadable;	/* samples with "?" */
	uint64_t absent;	/* samples of processes without the symbol */
};

struct ivm_labels;

/* specs (n <= IVM_LABELS_MAX) are copied; g is borrowed. */
struct ivm_error *ivm_labels_create(const struct ivm_label_spec *specs,
				    size_t n, const struct ivm_labels_guest *g,
				    struct ivm_labels **ret);
void ivm_labels_destroy(struct ivm_labels *l);

/*
 * The labels of t now into out (room for IVM_LABELS_MAX; *nr set): one
 * per spec that applies to its process, in spec order.  Symbols are
 * looked up once per address space (again after a failure, at most every
 * IVM_LABELS_RETRY_NS); values are read every time.  Keys and values are
 * owned by l, valid until its next call.  (Retries back off: twice as
 * long after each, up to 64 x IVM_LABELS_RETRY_NS.)
 */
#define IVM_LABELS_RETRY_NS 1000000000ull
void ivm_labels_read(struct ivm_labels *l, const struct ivm_label_target *t,
		     uint64_t now_ns, struct ivm_label *out, size_t *nr);

size_t ivm_labels_count(const struct ivm_labels *l);
const struct ivm_label_stats *ivm_labels_stats(const struct ivm_labels *l,
					       size_t i);
/* Why label i's last "?" was, or NULL: for the end of the run. */
const char *ivm_labels_last_why(const struct ivm_labels *l, size_t i);

/*
 * The counts as STATS items "label.KEY.read", "label.KEY.unreadable" and
 * "label.KEY.absent" into st (at most room; names owned by l, valid
 * until its next call of this); returns how many.
 */
#define IVM_STAT_LABEL_PREFIX "label."
size_t ivm_labels_fill_stats(struct ivm_labels *l, struct ivm_stat *st,
			     size_t room);

#endif /* IVM_LABELS_H */
