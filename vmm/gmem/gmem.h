/* SPDX-License-Identifier: MIT */
/*
 * gmem: reading guest memory from the host.
 *
 * One interface, several backends:
 *  - process: physical reads with process_vm_readv() on the QEMU process,
 *    using a table of guest RAM regions (gpa -> host virtual address) found
 *    through QMP (see vmm/access/qemu_discovery.h);
 *  - core: an ELF core written by QEMU's dump-guest-memory (segments carry
 *    physical addresses; with "paging": true, virtual ones too);
 *  - synthetic buffers, for tests.
 * Virtual reads walk the x86-64 page tables on top of physical reads (see
 * x86_64_paging.h).
 *
 * Every value read from the guest is hostile.  A read that touches anything
 * outside guest RAM, or comes back short, fails with IVM_ERROR_FAULT carrying
 * the first guest address that could not be read; it never reads host memory
 * outside the regions, and never crashes.
 */
#ifndef IVM_GMEM_H
#define IVM_GMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"
#include "base/x86_64_regs.h"

struct ivm_gmem;

/* One guest RAM region as QEMU maps it. */
struct ivm_gmem_region {
	uint64_t gpa;		/* guest physical start */
	uint64_t size;		/* bytes */
	uint64_t hva;		/* host virtual address in the QEMU process */
};

/* One piece of a batched physical read (ivm_gmem_read_phys_many). */
struct ivm_gmem_piece {
	uint64_t gpa;
	void *buf;
	size_t len;
};

/*
 * Backend operations.  read_phys must read exactly len bytes or fail with a
 * fault error naming the first unreadable guest physical address.
 * read_phys_many is optional (NULL: read_phys is called for each piece); it
 * has the contract of ivm_gmem_read_phys_many.  destroy frees the backend's
 * private data (ivm_gmem_priv), not the gmem itself.
 */
struct ivm_gmem_ops {
	struct ivm_error *(*read_phys)(struct ivm_gmem *gmem, uint64_t gpa,
				       void *buf, size_t len);
	void (*destroy)(struct ivm_gmem *gmem);
	struct ivm_error *(*read_phys_many)(struct ivm_gmem *gmem,
					    const struct ivm_gmem_piece *pieces,
					    size_t nr_pieces);
};

/*
 * A gmem over a backend of the caller's: ops must outlive the gmem; priv is
 * handed to ops->destroy when the gmem is destroyed.  The backends below are
 * built on this; it is public so a new source of guest memory (another
 * hypervisor, a recorded trace) needs no change here.
 */
struct ivm_error *ivm_gmem_create(const struct ivm_gmem_ops *ops, void *priv,
				  struct ivm_gmem **ret);
void *ivm_gmem_priv(struct ivm_gmem *gmem);

/*
 * Physical reads from the live QEMU process pid.  regions is copied; they
 * may be given in any order but must not overlap, be empty or wrap around
 * the address space (IVM_ERROR_INVALID).  A read spanning adjacent regions
 * is split; one touching a hole, or coming back short from
 * process_vm_readv() (a stale table), is a fault at the first missing gpa;
 * once QEMU has exited, reads fail with IVM_ERROR_GONE.  The guest keeps
 * running while we read: nothing read is consistent unless the caller makes
 * it so.
 */
struct ivm_error *ivm_gmem_process_create(pid_t pid,
					  const struct ivm_gmem_region *regions,
					  size_t nr_regions,
					  struct ivm_gmem **ret);

/*
 * Physical reads from guest RAM mapped read-only into this process: works
 * when QEMU's RAM is a shared file mapping (memfd or file backend with
 * share=on), opened through /proc/PID/map_files (root).  Reads are memory
 * copies, no system calls.  IVM_ERROR_NOT_FOUND when some region is
 * private (anonymous) memory: use ivm_gmem_process_create() then.
 */
struct ivm_error *ivm_gmem_mmap_create(pid_t pid,
				       const struct ivm_gmem_region *regions,
				       size_t nr_regions, struct ivm_gmem **ret);

/*
 * Physical reads from an ELF core written by QEMU dump-guest-memory.  The
 * file is validated (ELF64, little-endian, x86-64, ET_CORE; program headers
 * and every segment's data inside the file, no overflowing offsets,
 * p_filesz <= p_memsz; PN_XNUM program header counts) before it is used;
 * failures are IVM_ERROR_ELF.  The file is mapped, not read: it must not be
 * truncated while the gmem lives.  A core dumped with paging only holds the
 * physical pages some page table mapped (for Linux, all of RAM through the
 * direct map).  For the mutation harness only, IVM_CORE_TRACE and
 * IVM_CORE_PATCH in the environment log its reads and patch it in memory
 * (gmem_core.c says how and why).
 */
struct ivm_error *ivm_gmem_core_create(const char *path, struct ivm_gmem **ret);

/*
 * The same over a core already in memory (for fuzzing, or a core received
 * over a pipe).  data is borrowed, not copied: it must outlive the gmem.
 */
struct ivm_error *ivm_gmem_core_create_from_memory(const void *data,
						   size_t size,
						   struct ivm_gmem **ret);

/*
 * Physical reads from host buffers standing for guest RAM, for unit tests
 * and fuzzing.  The buffers are borrowed, not copied: they must outlive the
 * gmem.
 */
struct ivm_error *ivm_gmem_buffer_create(const struct ivm_gmem_region *regions,
					 size_t nr_regions,
					 struct ivm_gmem **ret);

void ivm_gmem_destroy(struct ivm_gmem *gmem);

/* Read len bytes of guest physical memory at gpa. */
struct ivm_error *ivm_gmem_read_phys(struct ivm_gmem *gmem, uint64_t gpa,
				     void *buf, size_t len);

/*
 * Read len bytes at guest virtual address va, translated through the page
 * tables rooted at cr3 (the value of CR3; the PCID and flag bits are
 * ignored).  la57 selects 5-level paging.  Reads may cross page boundaries;
 * each page is translated separately.
 */
struct ivm_error *ivm_gmem_read_virt(struct ivm_gmem *gmem, uint64_t cr3,
				     int la57, uint64_t va, void *buf,
				     size_t len);
/*
 * (read_virt, continued.)  A fault carries the first guest *virtual*
 * address that could not be read: the start of the page that is not mapped,
 * or whose page-table entries or target lie outside guest RAM, or the first
 * missing byte when the target frame is only partly backed.  Every call
 * walks the tables afresh; ivm_x86_64_read_virt() (x86_64_paging.h) does
 * the same through a caller-owned translation cache.
 */

/*
 * Read several pieces of guest physical memory at once; the process backend
 * turns them into one process_vm_readv() call (per 512 contiguous ranges), so an
 * unwinder fetching a dozen scattered words pays one system call, not a
 * dozen.  Pieces are read in order; on a fault the error names the first
 * unreadable address of the first piece that could not be read in full, the
 * pieces before it are complete and the contents of the others unspecified.
 * A piece of length 0 is allowed and reads nothing.
 */
struct ivm_error *ivm_gmem_read_phys_many(struct ivm_gmem *gmem,
					  const struct ivm_gmem_piece *pieces,
					  size_t nr_pieces);

/*
 * How many reads went to the backend since the gmem was created: one per
 * ivm_gmem_read_phys() and one per ivm_gmem_read_phys_many() (or one per
 * piece for a backend without batches).  For the process backend that is
 * the number of process_vm_readv() system calls, the cost that matters
 * live (a batch of more than 512 ranges makes one call per 512).  For
 * benchmarks and statistics.
 */
uint64_t ivm_gmem_backend_calls(const struct ivm_gmem *gmem);
/* The same count's word, for a reader that samples it often (stage_clock). */
const uint64_t *ivm_gmem_backend_calls_word(const struct ivm_gmem *gmem);

/*
 * Core backend extras.  Each fails with IVM_ERROR_INVALID (or returns
 * 0 / NULL) on a gmem that is not a core.
 *
 * A core from dump-guest-memory with "paging": true maps guest virtual
 * addresses (p_vaddr) as well as physical ones (p_paddr);
 * ivm_gmem_core_has_vaddr() says whether this one does, and
 * ivm_gmem_core_read_vaddr() reads through those mappings, as QEMU
 * translated them at dump time (no page walk).  A fault names the first
 * virtual address no segment covers.  Bytes a segment declares in
 * p_memsz but not in p_filesz read as zeros, in both address spaces.
 */
bool ivm_gmem_is_core(const struct ivm_gmem *gmem);
bool ivm_gmem_core_has_vaddr(const struct ivm_gmem *gmem);
struct ivm_error *ivm_gmem_core_read_vaddr(struct ivm_gmem *gmem, uint64_t va,
					   void *buf, size_t len);

/*
 * One ELF note of the core.  name is not necessarily NUL-terminated within
 * namesz (the ELF rule says it is; a hostile file may say otherwise); desc
 * points into the core and is valid while the gmem lives.
 */
struct ivm_elf_note {
	const char *name;
	uint32_t namesz;	/* without the trailing NUL, if there was one */
	uint32_t type;
	const void *desc;
	uint32_t descsz;
};

/*
 * Call fn on each note of each PT_NOTE segment, in file order.  Notes were
 * bounds-checked when the core was opened; iteration stops at the first
 * malformed one.  fn returning &ivm_stop ends the iteration with success;
 * any other error ends it and is returned.
 */
struct ivm_error *ivm_gmem_core_for_each_note(
	struct ivm_gmem *gmem,
	struct ivm_error *(*fn)(const struct ivm_elf_note *note, void *arg),
	void *arg);

/*
 * Number of vCPUs the core has register state for: the larger of the count
 * of NT_PRSTATUS notes and of QEMU's own "QEMU" notes (QEMU writes one of
 * each per vCPU, in vCPU order).
 */
size_t ivm_gmem_core_nr_cpus(const struct ivm_gmem *gmem);

/*
 * Registers of vCPU cpu (0-based) from the core: rax..r15, rip, rflags,
 * segment selectors, fs/gs base, cr0/cr2/cr3/cr4 and (if QEMU wrote it)
 * kernel_gs_base from the QEMU note, completed from NT_PRSTATUS where the
 * QEMU note is missing.  ret->valid says which fields are set (EFER is
 * never in a core).  IVM_ERROR_NOT_FOUND if cpu >= ivm_gmem_core_nr_cpus().
 */
struct ivm_error *ivm_gmem_core_cpu_state(struct ivm_gmem *gmem, size_t cpu,
					  struct ivm_x86_regs *ret);

/*
 * The VMCOREINFO note's text ("OSRELEASE=...\nKERNELOFFSET=...\n
 * SYMBOL(swapper_pg_dir)=...\n..."), NUL-terminated, owned by the gmem;
 * NULL if the core has none.  Hostile text: parse it defensively.
 */
const char *ivm_gmem_core_vmcoreinfo(const struct ivm_gmem *gmem);

static inline struct ivm_error *ivm_gmem_read_u64_phys(struct ivm_gmem *gmem,
						       uint64_t gpa,
						       uint64_t *ret)
{
	return ivm_gmem_read_phys(gmem, gpa, ret, sizeof(*ret));
}

#endif /* IVM_GMEM_H */
