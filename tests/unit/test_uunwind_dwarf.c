// SPDX-License-Identifier: MIT
/*
 * The DWARF CFI user unwinder against the real CFI of this very test
 * binary (a PIE, so with a load bias) and of the host's libc.so.6:
 *  - a real stack: a helper thread blocks at a known depth in functions
 *    built without frame pointers; a signal hands us its interrupted
 *    registers (what PTRACE_GETREGS or a guest pt_regs would give) and we
 *    unwind it over process_vm_readv of our own memory;
 *  - a signal frame: the handler unwinds itself through glibc's
 *    __restore_rt (CFA and register rules that are DWARF expressions);
 *  - a PLT entry (a CFA expression on rip);
 *  - synthetic stacks built on real return addresses: faults, loops, the
 *    span bound, garbage return addresses, the frame cap, the frame-pointer
 *    fallback where no mapping covers a pc;
 *  - ivm_ubinary_open on corrupt, foreign and truncated ELF files.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "kernel/ksyms.h"
#include "base/bytes.h"
#include "unwind/ucfi.h"
#include "unwind/uelf.h"
#include "unwind/uimage.h"
#include "unwind/uunwind.h"
#include "unwind/uunwind_dwarf.h"

/* A real frame of its own: not inlined, cloned, or left by a tail call. */
#define REAL_FRAME __attribute__((noipa, optimize("omit-frame-pointer")))

/* ---- our own address space as the "guest" -------------------------------- */

static struct ivm_error *read_self(void *ctx, uint64_t va, void *buf,
				   size_t len)
{
	struct iovec local = { buf, len };
	struct iovec remote = { (void *)(uintptr_t)va, len };
	ssize_t n;

	(void)ctx;
	n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
	if (n != (ssize_t)len)
		return ivm_error_fault(va, "process_vm_readv at %#llx",
				       (unsigned long long)va);
	return NULL;
}

static const struct ivm_kmem_reader self_reader = { read_self, NULL };

#define MAX_MAPS 8

/*
 * One file as "the guest" holds it: read by file offset through our own
 * mappings of it, for the unwinder's images (no host file opened).
 */
struct self_file {
	char path[4096];
	struct { uint64_t start, end, off; } ranges[MAX_MAPS];
	size_t nr;
	struct ivm_kmem_reader reader;
	struct ivm_uimage *image;
	/* File offsets [hole_lo, hole_hi) the "guest" does not hold. */
	uint64_t hole_lo, hole_hi;
};

struct self_maps {
	struct ivm_ubinary *bins[MAX_MAPS];
	size_t nr_bins;
	bool images;		/* CFI from our memory, not from the files */
	struct self_file files[MAX_MAPS];
	size_t nr_files;
	struct ivm_umapping maps[MAX_MAPS];
	size_t nr;
	uint64_t exe_bias;
	const struct ivm_umapping *exe, *libc;
	struct ivm_ksyms *syms;	/* of the test binary */
};

static struct self_maps self;

static struct ivm_ubinary *bin_for(const char *path)
{
	struct ivm_ubinary *b;

	for (size_t i = 0; i < self.nr_bins; i++)
		if (!strcmp(ivm_ubinary_path(self.bins[i]), path))
			return self.bins[i];
	cr_assert_lt(self.nr_bins, MAX_MAPS);
	cr_assert_null(ivm_ubinary_open(path, &b), "open %s", path);
	self.bins[self.nr_bins++] = b;
	return b;
}

static struct ivm_error *read_self_file(void *ctx, uint64_t off, void *buf,
				       size_t len)
{
	struct self_file *f = ctx;
	uint8_t *out = buf;

	if (f->hole_hi && off < f->hole_hi && off + len > f->hole_lo)
		return ivm_error_fault(off < f->hole_lo ? f->hole_lo : off,
				       "%s: not held", f->path);
	while (len) {
		size_t i, n;

		for (i = 0; i < f->nr; i++)
			if (off >= f->ranges[i].off &&
			    off - f->ranges[i].off <
			    f->ranges[i].end - f->ranges[i].start)
				break;
		if (i == f->nr)
			return ivm_error_fault(off, "%s: offset not mapped",
					       f->path);
		n = f->ranges[i].end - f->ranges[i].start -
		    (off - f->ranges[i].off);
		if (n > len)
			n = len;
		cr_assert_null(read_self(NULL, f->ranges[i].start + off -
					 f->ranges[i].off, out, n));
		out += n;
		off += n;
		len -= n;
	}
	return NULL;
}

/* Every mapping of path, and the image read through them. */
static struct self_file *file_for(const char *path)
{
	char line[4608];
	struct self_file *f;
	FILE *maps;

	for (size_t i = 0; i < self.nr_files; i++)
		if (!strcmp(self.files[i].path, path))
			return &self.files[i];
	cr_assert_lt(self.nr_files, MAX_MAPS);
	f = &self.files[self.nr_files++];
	snprintf(f->path, sizeof(f->path), "%s", path);
	maps = fopen("/proc/self/maps", "re");
	cr_assert_not_null(maps);
	while (fgets(line, sizeof(line), maps)) {
		unsigned long long start, end, off;
		char name[4096] = "";

		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %4095s", &start,
			   &end, &off, name) < 3 || strcmp(name, path))
			continue;
		cr_assert_lt(f->nr, MAX_MAPS);
		f->ranges[f->nr].start = start;
		f->ranges[f->nr].end = end;
		f->ranges[f->nr].off = off;
		f->nr++;
	}
	fclose(maps);
	f->reader = (struct ivm_kmem_reader){ read_self_file, f };
	cr_assert_null(ivm_uimage_create(&f->reader, &f->image), "%s", path);
	return f;
}

/*
 * The executable mappings of the test binary and of libc, from
 * /proc/self/maps, each with the bias ivm_ubinary_bias() derives from its
 * start and file offset: the same computation the profiler makes from the
 * guest helper's MAPS answer.
 */
static void load_self_maps_as(bool images)
{
	char exe[4096], line[4608];
	ssize_t n;
	FILE *f;

	memset(&self, 0, sizeof(self));
	self.images = images;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	cr_assert_gt(n, 0);
	exe[n] = 0;
	f = fopen("/proc/self/maps", "re");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		char perms[8], path[4096];
		struct ivm_umapping *m;
		struct ivm_ubinary *b;
		bool is_exe, is_libc;

		path[0] = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095s", &start,
			   &end, perms, &off, path) < 4 || perms[2] != 'x')
			continue;
		is_exe = !strcmp(path, exe);
		is_libc = strstr(path, "/libc.so.6") != NULL;
		if (!is_exe && !is_libc)
			continue;
		cr_assert_lt(self.nr, MAX_MAPS);
		m = &self.maps[self.nr++];
		m->start = start;
		m->end = end;
		if (self.images) {
			struct self_file *sf = file_for(path);

			m->image = sf->image;
			m->file = &sf->reader;
			cr_assert(ivm_uelf_bias(ivm_uimage_elf(sf->image),
						start, off, &m->bias));
		} else {
			b = bin_for(path);
			m->binary = b;
			cr_assert_null(ivm_ubinary_bias(b, start, off,
							&m->bias));
		}
		if (is_exe) {
			self.exe = m;
			self.exe_bias = m->bias;
		} else {
			self.libc = m;
		}
	}
	fclose(f);
	cr_assert_not_null(self.exe, "no executable mapping of %s", exe);
	cr_assert_not_null(self.libc, "no libc.so.6 mapping");
	cr_assert_null(ivm_ksyms_load_elf(exe, &self.syms));
}

static void load_self_maps(void)
{
	load_self_maps_as(false);
}

static void load_self_images(void)
{
	load_self_maps_as(true);
}

static void unload_self_maps(void)
{
	for (size_t i = 0; i < self.nr_bins; i++)
		ivm_ubinary_destroy(self.bins[i]);
	for (size_t i = 0; i < self.nr_files; i++)
		ivm_uimage_destroy(self.files[i].image);
	ivm_ksyms_destroy(self.syms);
	memset(&self, 0, sizeof(self));
}

/* The test binary's function at pc (a return address unless exact). */
static const char *self_name(const struct ivm_frame *f)
{
	uint64_t pc = f->pc - (f->flags & IVM_FRAME_REGS ? 0 : 1);
	const struct ivm_ksym *sym;

	if (pc < self.exe->start || pc >= self.exe->end)
		return "?";
	sym = ivm_ksyms_symbolize(self.syms, pc - self.exe_bias, NULL);
	return sym ? sym->name : "?";
}

static bool in_libc(uint64_t pc)
{
	return pc >= self.libc->start && pc < self.libc->end;
}

/* Log a stack (criterion --verbose shows it): what each unwinder found. */
static void log_stack(const char *what, const struct ivm_stack *st)
{
	cr_log_info("%s: %u frames, flags %#x", what, st->nr, st->flags);
	for (uint32_t i = 0; i < st->nr; i++)
		cr_log_info("  #%u %#llx sp %#llx %s%s%s", i,
			    (unsigned long long)st->frames[i].pc,
			    (unsigned long long)st->frames[i].sp,
			    in_libc(st->frames[i].pc) ? "[libc]" :
			    self_name(&st->frames[i]),
			    st->frames[i].flags & IVM_FRAME_REGS ? " regs" : "",
			    st->frames[i].flags & IVM_FRAME_INEXACT ? " inexact" :
			    "");
}

static void regs_from_mcontext(const mcontext_t *mc, struct ivm_x86_regs *r)
{
	memset(r, 0, sizeof(*r));
	r->valid = IVM_X86_REGS_GPRS;
	r->rax = mc->gregs[REG_RAX];
	r->rbx = mc->gregs[REG_RBX];
	r->rcx = mc->gregs[REG_RCX];
	r->rdx = mc->gregs[REG_RDX];
	r->rsi = mc->gregs[REG_RSI];
	r->rdi = mc->gregs[REG_RDI];
	r->rbp = mc->gregs[REG_RBP];
	r->rsp = mc->gregs[REG_RSP];
	r->r8 = mc->gregs[REG_R8];
	r->r9 = mc->gregs[REG_R9];
	r->r10 = mc->gregs[REG_R10];
	r->r11 = mc->gregs[REG_R11];
	r->r12 = mc->gregs[REG_R12];
	r->r13 = mc->gregs[REG_R13];
	r->r14 = mc->gregs[REG_R14];
	r->r15 = mc->gregs[REG_R15];
	r->rip = mc->gregs[REG_RIP];
	r->rflags = mc->gregs[REG_EFL];
}

/* ---- a thread blocked at a known depth ----------------------------------- */

static volatile int release;		/* futex word: 1 lets the thread go */
static volatile int arrived;
static volatile int handled;		/* futex word: the handler ran */
static struct ivm_x86_regs interrupted;	/* registers the signal caught */
static bool unwind_in_handler;
static struct ivm_frame handler_frames[64];
static struct ivm_stack handler_stack;
static struct ivm_error *handler_err;

static long raw_futex(volatile int *word, int op, int val)
{
	register long r10 __asm__("r10") = 0;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_futex), "D"(word), "S"((long)op),
			   "d"((long)val), "r"(r10)
			 : "rcx", "r11", "memory");
	return ret;
}

/*
 * The leaf: waits on a raw futex syscall of its own, so the interrupted pc
 * is inside this function, not in libc.
 */
static REAL_FRAME int uud_blocker(int depth)
{
	arrived = 1;
	while (!release)
		raw_futex(&release, FUTEX_WAIT_PRIVATE, 0);
	__asm__ volatile("" ::: "memory");
	return depth + 1;
}

static REAL_FRAME int uud_level3(int x)
{
	int r = uud_blocker(x + 3);

	__asm__ volatile("" ::: "memory");
	return r * 3;
}

static REAL_FRAME int uud_level2(int x)
{
	int r = uud_level3(x + 2);

	__asm__ volatile("" ::: "memory");
	return r * 2;
}

static REAL_FRAME int uud_level1(int x)
{
	int r = uud_level2(x + 1);

	__asm__ volatile("" ::: "memory");
	return r + 7;
}

static REAL_FRAME void *uud_thread_main(void *arg)
{
	int r = uud_level1((int)(uintptr_t)arg);

	__asm__ volatile("" ::: "memory");
	return (void *)(uintptr_t)r;
}

static REAL_FRAME void uud_on_signal(int sig, siginfo_t *si, void *ucv)
{
	const ucontext_t *uc = ucv;
	ucontext_t here;

	(void)sig;
	(void)si;
	regs_from_mcontext(&uc->uc_mcontext, &interrupted);
	if (unwind_in_handler) {
		/*
		 * Unwind ourselves from here: through __restore_rt back into
		 * the interrupted uud_blocker.  Our frame and those above stay put
		 * while we call down into the unwinder.
		 */
		struct ivm_x86_regs r;

		getcontext(&here);
		regs_from_mcontext(&here.uc_mcontext, &r);
		ivm_stack_init(&handler_stack, handler_frames, 64);
		handler_err = ivm_uunwind_dwarf(&self_reader, &r, 0, self.maps,
						self.nr, &handler_stack);
	}
	handled = 1;
	raw_futex(&handled, FUTEX_WAKE_PRIVATE, 1);
}

static pthread_t blocked;

/* Start the thread, wait until it blocks, interrupt it once. */
static void catch_blocked_thread(bool in_handler)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = uud_on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	cr_assert_eq(sigaction(SIGUSR2, &sa, NULL), 0);
	release = 0;
	arrived = 0;
	handled = 0;
	unwind_in_handler = in_handler;
	cr_assert_eq(pthread_create(&blocked, NULL, uud_thread_main,
				    (void *)1), 0);
	while (!arrived)
		usleep(1000);
	usleep(20000);	/* let it enter the futex wait (either is fine) */
	cr_assert_eq(pthread_kill(blocked, SIGUSR2), 0);
	while (!handled)
		raw_futex(&handled, FUTEX_WAIT_PRIVATE, 0);
}

static void release_blocked_thread(void)
{
	void *ret;

	release = 1;
	raw_futex(&release, FUTEX_WAKE_PRIVATE, 1);
	pthread_join(blocked, &ret);
	cr_assert_eq((uintptr_t)ret, ((1 + 1 + 2 + 3 + 1) * 3 * 2) + 7);
}

TestSuite(uunwind_dwarf, .init = load_self_maps, .fini = unload_self_maps);

static const char *const blocked_chain[] = {
	"uud_blocker", "uud_level3", "uud_level2", "uud_level1", "uud_thread_main",
};
#define CHAIN_LEN (sizeof(blocked_chain) / sizeof(blocked_chain[0]))

/* frames[first..] are our chain, then libc's start_thread and clone3. */
static void assert_blocked_chain(const struct ivm_stack *st, uint32_t first)
{
	cr_assert_geq(st->nr, first + CHAIN_LEN + 1, "only %u frames", st->nr);
	for (uint32_t i = 0; i < CHAIN_LEN; i++) {
		const struct ivm_frame *f = &st->frames[first + i];

		cr_assert_str_eq(self_name(f), blocked_chain[i], "frame %u",
				 first + i);
		cr_assert(f->flags & IVM_FRAME_USER);
		cr_assert_not(f->flags & IVM_FRAME_INEXACT, "frame %u inexact",
			      first + i);
		if (i)
			cr_assert_gt(f->sp, st->frames[first + i - 1].sp);
	}
	/* start_thread and clone3, in libc, then the clean end clone3 marks. */
	for (uint32_t i = first + CHAIN_LEN; i < st->nr; i++)
		cr_assert(in_libc(st->frames[i].pc), "frame %u %#llx not libc",
			  i, (unsigned long long)st->frames[i].pc);
	cr_assert_eq(st->flags, 0, "stack flags %#x", st->flags);
}

static void real_blocked_thread(void)
{
	struct ivm_frame frames[64], fp_frames[64];
	struct ivm_stack st, fp;

	catch_blocked_thread(false);
	ivm_stack_init(&st, frames, 64);
	cr_assert_null(ivm_uunwind_dwarf(&self_reader, &interrupted, 0,
					 self.maps, self.nr, &st));
	log_stack("dwarf", &st);
	cr_assert_eq(st.frames[0].pc, interrupted.rip);
	cr_assert_eq(st.frames[0].flags, IVM_FRAME_USER | IVM_FRAME_REGS);
	assert_blocked_chain(&st, 0);

	/*
	 * The frame-pointer unwinder on the same registers: these frames
	 * keep no frame pointer, so it cannot find this chain.
	 */
	ivm_stack_init(&fp, fp_frames, 64);
	cr_assert_null(ivm_uunwind_fp(&self_reader, &interrupted, 0, &fp));
	log_stack("frame pointers", &fp);
	cr_assert(fp.nr < CHAIN_LEN ||
		  strcmp(self_name(&fp.frames[1]), "uud_level3"),
		  "frame pointers found the chain: not an -fomit-frame-pointer test");
	release_blocked_thread();
}

Test(uunwind_dwarf, real_blocked_thread)
{
	real_blocked_thread();
}

static void through_a_signal_frame(void)
{
	const struct ivm_stack *st = &handler_stack;
	uint32_t i;

	catch_blocked_thread(true);
	cr_assert_null(handler_err);
	log_stack("from the handler", st);
	cr_assert_str_eq(self_name(&st->frames[0]), "uud_on_signal");
	/* uud_on_signal's caller is __restore_rt in libc, a signal frame... */
	cr_assert_geq(st->nr, 3);
	cr_assert(in_libc(st->frames[1].pc));
	/* ...whose caller is the interrupted uud_blocker, at an exact pc. */
	for (i = 2; i < st->nr && in_libc(st->frames[i].pc); i++)
		;
	cr_assert_lt(i, st->nr);
	cr_assert_eq(st->frames[i].pc, interrupted.rip);
	cr_assert_eq(st->frames[i].sp, interrupted.rsp);
	cr_assert(st->frames[i].flags & IVM_FRAME_REGS);
	assert_blocked_chain(st, i);
	release_blocked_thread();
}

Test(uunwind_dwarf, through_a_signal_frame)
{
	through_a_signal_frame();
}

/*
 * The same real stacks with every row from "guest bytes": the test
 * binary's and libc's CFI read through our own mappings of them (uimage),
 * no file opened.
 */
TestSuite(uunwind_image, .init = load_self_images, .fini = unload_self_maps);

Test(uunwind_image, real_blocked_thread)
{
	cr_assert_null(self.maps[0].binary);
	real_blocked_thread();
}

Test(uunwind_image, through_a_signal_frame)
{
	through_a_signal_frame();
}

/*
 * The CFI of one function of the chain exists but the guest does not hold
 * its bytes (its FDE lies on a page that was never read): its caller is
 * found by scanning the stack for a return address after a direct call
 * of it, marked inexact, and the chain goes on by CFI to libc.
 */
Test(uunwind_image, scan_where_the_cfi_is_not_held)
{
	struct self_file *f = NULL;
	const struct ivm_uelf *elf;
	struct ivm_uelf_vreader vr;
	struct ivm_kmem_reader vmem;
	struct ivm_frame frames[64];
	struct ivm_stack st;
	uint64_t fde, off;
	uint8_t len[4];
	uint32_t i;

	for (size_t k = 0; k < self.nr_files; k++)
		if (self.files[k].image == self.exe->image)
			f = &self.files[k];
	cr_assert_not_null(f);
	elf = ivm_uimage_elf(f->image);
	ivm_uelf_vreader_init(&vr, &f->reader, elf, &vmem);
	cr_assert_null(ivm_ucfi_find(&vmem, &elf->eh,
				     (uint64_t)(uintptr_t)uud_level2 -
				     self.exe_bias, &fde));
	cr_assert_null(vmem.read(vmem.ctx, fde, len, 4));
	cr_assert(ivm_uelf_offset(elf, fde, 4, &off));
	catch_blocked_thread(false);
	f->hole_lo = off;
	f->hole_hi = off + 4 + ivm_le32(len);
	ivm_stack_init(&st, frames, 64);
	cr_assert_null(ivm_uunwind_dwarf(&self_reader, &interrupted, 0,
					 self.maps, self.nr, &st));
	f->hole_lo = f->hole_hi = 0;
	log_stack("uud_level2's CFI not held", &st);
	cr_assert_geq(st.nr, CHAIN_LEN + 1);
	for (i = 0; i < CHAIN_LEN; i++)
		cr_assert_str_eq(self_name(&st.frames[i]), blocked_chain[i],
				 "frame %u", i);
	/* uud_level1 was found by the scan; the rest by CFI again. */
	cr_assert(st.frames[3].flags & IVM_FRAME_INEXACT);
	cr_assert_not(st.frames[2].flags & IVM_FRAME_INEXACT);
	cr_assert_not(st.frames[4].flags & IVM_FRAME_INEXACT);
	cr_assert(in_libc(st.frames[st.nr - 1].pc));
	cr_assert_eq(st.flags, IVM_STACK_FP_FALLBACK, "flags %#x", st.flags);
	release_blocked_thread();
}

/* Without libc's CFI, start_thread falls back to frame pointers. */
Test(uunwind_dwarf, missing_mapping_falls_back)
{
	struct ivm_umapping only_exe = *self.exe;
	struct ivm_frame frames[64];
	struct ivm_stack st;

	catch_blocked_thread(false);
	ivm_stack_init(&st, frames, 64);
	cr_assert_null(ivm_uunwind_dwarf(&self_reader, &interrupted, 0,
					 &only_exe, 1, &st));
	log_stack("without libc", &st);
	cr_assert_geq(st.nr, CHAIN_LEN + 1);
	for (uint32_t i = 0; i < CHAIN_LEN; i++)
		cr_assert_str_eq(self_name(&st.frames[i]), blocked_chain[i]);
	/*
	 * The frame after uud_thread_main is start_thread's: found by
	 * CFI of the caller.  Any frame after it needs libc's CFI, so either
	 * a frame-pointer guess (marked) or a marked truncation.
	 */
	for (uint32_t i = CHAIN_LEN + 1; i < st.nr; i++)
		cr_assert(st.frames[i].flags & IVM_FRAME_INEXACT);
	cr_assert(st.nr == CHAIN_LEN + 1 || (st.flags & IVM_STACK_FP_FALLBACK));
	release_blocked_thread();
}

/* ---- synthetic stacks on real code addresses ----------------------------- */

#define STACK_LO 0x7ff000000000ull
#define STACK_WORDS 1024

static uint64_t stack_mem[STACK_WORDS];

static struct ivm_error *read_stack(void *ctx, uint64_t va, void *buf,
				    size_t len)
{
	(void)ctx;
	if (va < STACK_LO || va - STACK_LO > sizeof(stack_mem) ||
	    len > sizeof(stack_mem) - (va - STACK_LO))
		return ivm_error_fault(va, "unmapped");
	memcpy(buf, (uint8_t *)stack_mem + (va - STACK_LO), len);
	return NULL;
}

static const struct ivm_kmem_reader stack_reader = { read_stack, NULL };

static uint64_t word(unsigned int w)
{
	return STACK_LO + 8ull * w;
}

/*
 * A return address into uud_level2 whose call is uud_level2's first instruction's
 * row: function entry, where the CFA is rsp + 8 and the return address at
 * rsp.  Any such pc makes a frame that is one word on the stack.
 */
static uint64_t entry_ra(void *fn)
{
	return (uint64_t)(uintptr_t)fn + 1;
}

static struct ivm_x86_regs at(uint64_t rip, unsigned int sp_word)
{
	struct ivm_x86_regs r = { .valid = IVM_X86_REGS_GPRS };

	r.rip = rip;
	r.rsp = word(sp_word);
	return r;
}

Test(uunwind_dwarf, synthetic_chain_ends_cleanly)
{
	struct ivm_x86_regs r = at((uint64_t)(uintptr_t)uud_level1, 10);
	struct ivm_frame frames[16];
	struct ivm_stack st;

	memset(stack_mem, 0, sizeof(stack_mem));
	stack_mem[10] = entry_ra(uud_level2);
	stack_mem[11] = entry_ra(uud_level3);
	stack_mem[12] = 0;	/* a zero return address ends it */
	ivm_stack_init(&st, frames, 16);
	cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0, self.maps,
					 self.nr, &st));
	cr_assert_eq(st.nr, 3);
	cr_assert_eq(st.flags, 0);
	cr_assert_eq(st.frames[1].pc, entry_ra(uud_level2));
	cr_assert_eq(st.frames[1].sp, word(11));
	cr_assert_eq(st.frames[2].pc, entry_ra(uud_level3));
	cr_assert_eq(st.frames[2].sp, word(12));
}

Test(uunwind_dwarf, fault_is_marked_with_its_address)
{
	/* The last word of the fake stack returns to a word beyond it. */
	struct ivm_x86_regs r = at((uint64_t)(uintptr_t)uud_level1,
				   STACK_WORDS - 1);
	struct ivm_frame frames[16];
	struct ivm_stack st;

	stack_mem[STACK_WORDS - 1] = entry_ra(uud_level2);
	ivm_stack_init(&st, frames, 16);
	cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0, self.maps,
					 self.nr, &st));
	cr_assert_eq(st.nr, 2);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_FAULT);
	cr_assert_eq(st.fault_addr, word(STACK_WORDS));
}

Test(uunwind_dwarf, frame_cap)
{
	struct ivm_x86_regs r = at((uint64_t)(uintptr_t)uud_level1, 0);
	struct ivm_frame frames[8];
	struct ivm_stack st;

	for (unsigned int w = 0; w < STACK_WORDS; w++)
		stack_mem[w] = entry_ra(uud_level2);
	ivm_stack_init(&st, frames, 8);
	cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0, self.maps,
					 self.nr, &st));
	cr_assert_eq(st.nr, 8);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_CAP);
}

Test(uunwind_dwarf, garbage_return_addresses)
{
	static const uint64_t bad[] = {
		0xffffffff81000000ull,	/* kernel */
		0x0000800000000000ull,	/* non-canonical */
		0x10,			/* page zero */
	};
	struct ivm_frame frames[16];
	struct ivm_stack st;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ivm_x86_regs r = at((uint64_t)(uintptr_t)uud_level1, 10);

		stack_mem[10] = bad[i];
		ivm_stack_init(&st, frames, 16);
		cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0,
						 self.maps, self.nr, &st));
		cr_assert_eq(st.nr, 1, "case %zu", i);
		cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_BAD_ORC, "case %zu",
			     i);
	}
}

/* A frame-pointer function of ours, and a pc inside it past its prologue. */
static uint64_t fp_body_pc;

static __attribute__((noipa)) void uud_note_ra(void)
{
	fp_body_pc = (uint64_t)(uintptr_t)__builtin_return_address(0);
}

static __attribute__((noipa, optimize("no-omit-frame-pointer"))) int
uud_rbp_framed(int n)
{
	volatile char vla[n + 1];

	vla[0] = 1;
	uud_note_ra();
	return vla[0] + n;
}

/*
 * In uud_rbp_framed past its prologue the CFA is rbp + 16: an rbp below rsp
 * makes a CFA that does not grow, one 64 MiB up leaves the span.  Neither
 * may be read from.
 */
Test(uunwind_dwarf, cfa_must_grow_within_the_span)
{
	uint64_t rbps[] = { word(4), word(10) - 16,
			    word(10) + IVM_UUNWIND_MAX_SPAN };
	struct ivm_frame frames[16];
	struct ivm_stack st;

	cr_assert_eq(uud_rbp_framed(3), 4);
	cr_assert_neq(fp_body_pc, 0);
	for (size_t i = 0; i < 3; i++) {
		struct ivm_x86_regs r = at(fp_body_pc, 10);

		r.rbp = rbps[i];
		ivm_stack_init(&st, frames, 16);
		cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0,
						 self.maps, self.nr, &st));
		cr_assert_eq(st.nr, 1, "case %zu", i);
		cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_LOOP,
			     "case %zu: flags %#x", i, st.flags);
	}
	/* A sane rbp: the caller is found through the rbp-based CFA. */
	{
		struct ivm_x86_regs r = at(fp_body_pc, 10);

		r.rbp = word(20);
		stack_mem[20] = word(40);		/* saved rbp */
		stack_mem[21] = entry_ra(uud_level3);	/* return address */
		stack_mem[22] = 0;
		ivm_stack_init(&st, frames, 16);
		cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0,
						 self.maps, self.nr, &st));
		cr_assert_eq(st.nr, 2, "flags %#x", st.flags);
		cr_assert_eq(st.frames[1].pc, entry_ra(uud_level3));
		cr_assert_eq(st.frames[1].sp, word(22));
		cr_assert_eq(st.flags, 0);
	}
}

/*
 * A return address is unwound with the rules of the call before it
 * (pc - 1), not of the instruction it points to, which may begin another
 * function (after a call to a noreturn function).  A return address equal
 * to uud_level2's first byte must unwind like an exact pc one byte lower.
 */
Test(uunwind_dwarf, return_address_uses_the_call_site_rules)
{
	uint64_t fn = (uint64_t)(uintptr_t)uud_level2;
	struct ivm_frame fa[16], fb[16], fc[16];
	struct ivm_stack a, b, c;
	struct ivm_x86_regs r;

	memset(stack_mem, 0, sizeof(stack_mem));
	stack_mem[10] = fn;
	stack_mem[11] = entry_ra(uud_level3);
	ivm_stack_init(&a, fa, 16);
	ivm_stack_init(&b, fb, 16);
	ivm_stack_init(&c, fc, 16);
	r = at((uint64_t)(uintptr_t)uud_level1, 10);
	cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0, self.maps,
					 self.nr, &a));
	r = at(fn - 1, 11);
	cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0, self.maps,
					 self.nr, &b));
	r = at(fn, 11);
	cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0, self.maps,
					 self.nr, &c));
	if (b.nr == c.nr)
		cr_skip_test("the rules at uud_level2 - 1 and uud_level2 agree "
			     "in this build: nothing to tell apart");
	cr_assert_eq(a.nr, b.nr + 1, "a %u b %u c %u", a.nr, b.nr, c.nr);
	cr_assert_eq(a.flags, b.flags);
	for (uint32_t i = 1; i < b.nr; i++)
		cr_assert_eq(a.frames[i + 1].pc, b.frames[i].pc);
}

/*
 * rbp unchanged through a function that does not save it ("same value")
 * is what the next frame's rbp-based CFA needs.
 */
Test(uunwind_dwarf, same_value_registers_carry_over)
{
	struct ivm_x86_regs r = at((uint64_t)(uintptr_t)uud_level2, 10);
	struct ivm_frame frames[16];
	struct ivm_stack st;

	cr_assert_eq(uud_rbp_framed(3), 4);
	memset(stack_mem, 0, sizeof(stack_mem));
	/* level2 at entry returns into uud_rbp_framed's body... */
	stack_mem[10] = fp_body_pc;
	/* ...whose frame is at rbp: saved rbp, return address. */
	r.rbp = word(30);
	stack_mem[30] = 0;
	stack_mem[31] = entry_ra(uud_level3);
	ivm_stack_init(&st, frames, 16);
	cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0, self.maps,
					 self.nr, &st));
	cr_assert_eq(st.nr, 3, "nr %u flags %#x", st.nr, st.flags);
	cr_assert_eq(st.frames[1].pc, fp_body_pc);
	cr_assert_eq(st.frames[2].pc, entry_ra(uud_level3));
	cr_assert_eq(st.frames[2].sp, word(32));
	cr_assert_eq(st.flags, 0);
}

/*
 * Hand-written CFI with the rule kinds compilers rarely emit, each at its
 * own instruction: rbp kept in rbx (register rule), rbp saved above the
 * CFA (offset), rbp at an address computed by DW_CFA_expression, and a CFA
 * from DW_CFA_def_cfa_expression with a dereference.  Each is checked by
 * its effect: the next frame is uud_rbp_framed, whose CFA is rbp + 16.
 */
__asm__(".text\n"
	".globl uud_cfi_rules\n"
	".hidden uud_cfi_rules\n"
	".type uud_cfi_rules,@function\n"
	"uud_cfi_rules:\n"
	".cfi_startproc\n"
	"nop\n"
	".cfi_register %rbp, %rbx\n"
	".globl uud_cfi_reg_pc\n.hidden uud_cfi_reg_pc\n"
	"uud_cfi_reg_pc: nop\n"
	".cfi_offset %rbp, 8\n"
	".globl uud_cfi_off_pc\n.hidden uud_cfi_off_pc\n"
	"uud_cfi_off_pc: nop\n"
	/* DW_CFA_expression rbp, 2 bytes: DW_OP_breg7 (rsp) +24 */
	".cfi_escape 0x10, 0x06, 0x02, 0x77, 0x18\n"
	".globl uud_cfi_expr_pc\n.hidden uud_cfi_expr_pc\n"
	"uud_cfi_expr_pc: nop\n"
	/* DW_CFA_def_cfa_expression, 3 bytes: DW_OP_breg7 +16; DW_OP_deref */
	".cfi_escape 0x0f, 0x03, 0x77, 0x10, 0x06\n"
	".globl uud_cfi_cfa_pc\n.hidden uud_cfi_cfa_pc\n"
	"uud_cfi_cfa_pc: nop\n"
	"ret\n"
	".cfi_endproc\n"
	".size uud_cfi_rules, .-uud_cfi_rules\n");

extern char uud_cfi_reg_pc[], uud_cfi_off_pc[], uud_cfi_expr_pc[],
	uud_cfi_cfa_pc[];

Test(uunwind_dwarf, register_offset_and_expression_rules)
{
	static const struct {
		const char *pc;
		uint32_t caller_sp_word;
	} cases[] = {
		{ uud_cfi_reg_pc, 11 },
		{ uud_cfi_off_pc, 11 },
		{ uud_cfi_expr_pc, 11 },
		{ uud_cfi_cfa_pc, 20 },
	};
	struct ivm_frame frames[16];
	struct ivm_stack st;

	cr_assert_eq(uud_rbp_framed(3), 4);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ivm_x86_regs r = at((uint64_t)(uintptr_t)cases[i].pc,
					   10);

		memset(stack_mem, 0, sizeof(stack_mem));
		r.rbp = 0x1234;			/* wrong unless recovered */
		r.rbx = word(30);		/* register rule */
		stack_mem[10] = fp_body_pc;	/* return address, CFA - 8 */
		stack_mem[12] = i == 3 ? word(20) : word(30); /* offset 8 */
		stack_mem[13] = word(30);	/* expression: rsp + 24 */
		stack_mem[19] = fp_body_pc;	/* below the CFA of case 3 */
		stack_mem[30] = 0;		/* uud_rbp_framed's frame */
		stack_mem[31] = entry_ra(uud_level3);
		ivm_stack_init(&st, frames, 16);
		cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0,
						 self.maps, self.nr, &st));
		cr_assert_eq(st.nr, 3, "case %zu: nr %u flags %#x", i, st.nr,
			     st.flags);
		cr_assert_eq(st.frames[1].pc, fp_body_pc, "case %zu", i);
		cr_assert_eq(st.frames[1].sp, word(cases[i].caller_sp_word),
			     "case %zu", i);
		cr_assert_eq(st.frames[2].pc, entry_ra(uud_level3), "case %zu",
			     i);
		cr_assert_eq(st.flags, 0, "case %zu", i);
	}
}

Test(uunwind_dwarf, frame_pointer_fallback_where_no_mapping)
{
	/* pc in no mapping: rbp chain for that frame, then CFI again. */
	struct ivm_x86_regs r = at(0x10000, 10);
	struct ivm_frame frames[16];
	struct ivm_stack st;

	r.rbp = word(20);
	stack_mem[20] = 0;			/* saved rbp */
	stack_mem[21] = entry_ra(uud_level2);	/* return address */
	stack_mem[22] = entry_ra(uud_level3);	/* uud_level2 at entry: ra at rsp */
	stack_mem[23] = 0;
	ivm_stack_init(&st, frames, 16);
	cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0, self.maps,
					 self.nr, &st));
	cr_assert_eq(st.nr, 3, "nr %u flags %#x", st.nr, st.flags);
	cr_assert_eq(st.frames[1].pc, entry_ra(uud_level2));
	cr_assert(st.frames[1].flags & IVM_FRAME_INEXACT);
	cr_assert_eq(st.frames[2].pc, entry_ra(uud_level3));
	cr_assert_not(st.frames[2].flags & IVM_FRAME_INEXACT);
	cr_assert_eq(st.flags, IVM_STACK_FP_FALLBACK);

	/* No mapping and an rbp below rsp: nothing to go on. */
	r.rbp = word(2);
	ivm_stack_init(&st, frames, 16);
	cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0, self.maps,
					 self.nr, &st));
	cr_assert_eq(st.nr, 1);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_BAD_ORC);

	/* Unknown rbp cycle: a saved rbp pointing down is not followed. */
	r.rbp = word(20);
	stack_mem[20] = word(12);
	stack_mem[21] = 0x10008;	/* back into the unmapped "code" */
	ivm_stack_init(&st, frames, 16);
	cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0, self.maps,
					 self.nr, &st));
	cr_assert_eq(st.nr, 2);
	cr_assert_eq(st.flags,
		     IVM_STACK_FP_FALLBACK | IVM_STACK_TRUNCATED_BAD_ORC);
}

/* The link-time address of the test binary's .plt section, or 0. */
static uint64_t plt_address(void)
{
	uint64_t addr = 0;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	Elf *elf;
	int fd;

	elf_version(EV_CURRENT);
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	cr_assert_not_null(elf);
	cr_assert_eq(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, ".plt") && sh.sh_size >= 32)
			addr = sh.sh_addr;
	}
	elf_end(elf);
	close(fd);
	return addr;
}

/*
 * A lazy-binding PLT entry (jmp *GOT; push $n; jmp PLT0) has one FDE whose
 * CFA is an expression on rip: rsp + 8, plus 8 once the push ran (rip & 15
 * >= 11).
 */
static void plt_cfa_expression(void)
{
	uint64_t plt = plt_address();
	struct ivm_frame frames[16];
	struct ivm_stack st;

	if (!plt)
		cr_skip_test("no .plt in this test binary");
	for (int pushed = 0; pushed < 2; pushed++) {
		struct ivm_x86_regs r = at(plt + self.exe_bias + 16 +
					   (pushed ? 11 : 0), 10);

		memset(stack_mem, 0, sizeof(stack_mem));
		stack_mem[10] = pushed ? 5 : entry_ra(uud_level2);
		stack_mem[11] = pushed ? entry_ra(uud_level2) : 0;
		ivm_stack_init(&st, frames, 16);
		cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0,
						 self.maps, self.nr, &st));
		cr_assert_geq(st.nr, 2, "pushed %d: flags %#x", pushed,
			      st.flags);
		cr_assert_eq(st.frames[1].pc, entry_ra(uud_level2));
		cr_assert_eq(st.frames[1].sp, word(pushed ? 12 : 11));
		cr_assert_not(st.frames[1].flags & IVM_FRAME_INEXACT);
	}
}

Test(uunwind_dwarf, plt_cfa_expression)
{
	plt_cfa_expression();
}

Test(uunwind_image, plt_cfa_expression)
{
	plt_cfa_expression();
}

Test(uunwind_dwarf, caller_mistakes_are_errors)
{
	struct ivm_x86_regs r = at((uint64_t)(uintptr_t)uud_level1, 10);
	struct ivm_umapping bad = *self.exe;
	struct ivm_frame frames[4];
	struct ivm_stack st;
	struct ivm_error *err;

	ivm_stack_init(&st, frames, 0);
	err = ivm_uunwind_dwarf(&stack_reader, &r, 0, self.maps, self.nr,
				&st);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);

	ivm_stack_init(&st, frames, 4);
	bad.binary = NULL;
	err = ivm_uunwind_dwarf(&stack_reader, &r, 0, &bad, 1, &st);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	bad = *self.exe;
	bad.end = bad.start;
	err = ivm_uunwind_dwarf(&stack_reader, &r, 0, &bad, 1, &st);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	err = ivm_uunwind_dwarf(NULL, &r, 0, self.maps, self.nr, &st);
	cr_assert_not_null(err);
	ivm_error_destroy(err);

	/* A garbage start pc is no error: an empty stack. */
	r.rip = 0;
	cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0, self.maps,
					 self.nr, &st));
	cr_assert_eq(st.nr, 0);
}

/* ---- the binary object --------------------------------------------------- */

/* The build-id of the running executable, from its PT_NOTE in memory. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *data)
{
	uint8_t *out = data;

	(void)size;
	if (info->dlpi_name && info->dlpi_name[0])
		return 0;	/* the main program has an empty name */
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const uint8_t *p, *end;

		if (ph->p_type != PT_NOTE)
			continue;
		p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const void *)p;
			const uint8_t *desc = p + sizeof(*n) +
					      ((n->n_namesz + 3) & ~3u);

			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
			    n->n_descsz <= 64 && desc + n->n_descsz <= end) {
				out[0] = (uint8_t)n->n_descsz;
				memcpy(out + 1, desc, n->n_descsz);
				return 1;
			}
			p = desc + ((n->n_descsz + 3) & ~3u);
		}
	}
	return 0;
}

Test(uunwind_dwarf, binary_metadata)
{
	struct ivm_ubinary *b = self.exe->binary;
	uint8_t expect[65] = { 0 };
	const struct ivm_ubinary_segment *seg;
	struct ivm_umapping maps[4];
	const uint8_t *id;
	size_t len, n;

	cr_assert(ivm_ubinary_is_dyn(b));
	cr_assert_eq(dl_iterate_phdr(find_build_id, expect), 1,
		     "test binary has no build-id note");
	cr_assert(ivm_ubinary_build_id(b, &id, &len));
	cr_assert_eq(len, expect[0]);
	cr_assert_arr_eq(id, expect + 1, len);

	/* The text mapping lies inside the executable segment, biased. */
	cr_assert_geq(ivm_ubinary_nr_exec(b), 1);
	seg = ivm_ubinary_exec(b, 0);
	cr_assert_not_null(seg);
	cr_assert_null(ivm_ubinary_exec(b, ivm_ubinary_nr_exec(b)));
	n = ivm_ubinary_mappings(b, self.exe_bias, maps, 4);
	cr_assert_eq(n, ivm_ubinary_nr_exec(b));
	cr_assert_eq(maps[0].start, seg->vaddr + self.exe_bias);
	cr_assert_eq(maps[0].end, maps[0].start + seg->memsz);
	cr_assert_leq(maps[0].start & ~4095ull, self.exe->start);
	cr_assert_geq(maps[0].end, (uint64_t)(uintptr_t)uud_level1);
	cr_assert_eq(ivm_ubinary_mappings(b, 0, NULL, 0), n);
}

/* Write len bytes of src, patched at off with patch (if any), to a file. */
static void write_variant(const char *dst, const char *src, size_t len,
			  size_t off, const void *patch, size_t plen)
{
	FILE *in = fopen(src, "re");
	FILE *out = fopen(dst, "we");
	uint8_t *buf = malloc(len);

	cr_assert(in && out && buf);
	cr_assert_eq(fread(buf, 1, len, in), len);
	if (patch)
		memcpy(buf + off, patch, plen);
	cr_assert_eq(fwrite(buf, 1, len, out), len);
	fclose(in);
	fclose(out);
	free(buf);
}

static void expect_refused(const char *path, enum ivm_error_code code)
{
	struct ivm_ubinary *b = NULL;
	struct ivm_error *err = ivm_ubinary_open(path, &b);

	cr_assert_not_null(err, "%s opened", path);
	cr_assert_null(b);
	cr_assert_eq(err->code, code, "%s: code %d: %s", path, err->code,
		     ivm_error_string(err));
	cr_assert(strstr(ivm_error_string(err), path), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
}

/* Removed by the test's fini, which runs after a failed assertion too. */
static char variant_path[64];

static void unlink_variant(void)
{
	if (variant_path[0])
		unlink(variant_path);
}

Test(uunwind_dwarf, corrupt_and_foreign_files_are_refused,
     .fini = unlink_variant)
{
	const char *exe = ivm_ubinary_path(self.exe->binary);
	char *path = variant_path;
	uint16_t v;

	snprintf(path, sizeof(variant_path), "/tmp/ivm-h-elf-%d", getpid());

	expect_refused("/nonexistent/ivm-h", IVM_ERROR_OS);

	/* Text, not ELF. */
	write_variant(path, "/proc/self/maps", 200, 0, NULL, 0);
	expect_refused(path, IVM_ERROR_ELF);

	/* The ELF header alone: no program headers to read. */
	write_variant(path, exe, 64, 0, NULL, 0);
	expect_refused(path, IVM_ERROR_ELF);

	/* Not x86-64 (e_machine = EM_AARCH64). */
	v = EM_AARCH64;
	write_variant(path, exe, 4096, 18, &v, 2);
	expect_refused(path, IVM_ERROR_INVALID);

	/* A relocatable object (e_type = ET_REL). */
	v = ET_REL;
	write_variant(path, exe, 4096, 16, &v, 2);
	expect_refused(path, IVM_ERROR_INVALID);

	/* Truncated before its sections: headers fine, no CFI reachable. */
	write_variant(path, exe, 4096, 0, NULL, 0);
	{
		struct ivm_ubinary *b = NULL;
		struct ivm_error *err = ivm_ubinary_open(path, &b);

		/* Either refused, or opened with CFI lookups that find nothing. */
		if (!err) {
			struct ivm_x86_regs r = at((uint64_t)(uintptr_t)uud_level1,
						   10);
			struct ivm_umapping m = *self.exe;
			struct ivm_frame frames[4];
			struct ivm_stack st;

			m.binary = b;
			ivm_stack_init(&st, frames, 4);
			stack_mem[10] = entry_ra(uud_level2);
			cr_assert_null(ivm_uunwind_dwarf(&stack_reader, &r, 0,
							 &m, 1, &st));
			cr_assert_geq(st.nr, 1);
			ivm_ubinary_destroy(b);
		} else {
			ivm_error_destroy(err);
		}
	}
	ivm_ubinary_destroy(NULL);
}
