// SPDX-License-Identifier: MIT
/*
 * Fuzz the DWARF CFI user unwinder: the input is a small user stack image
 * and start registers; the CFI is real, that of the fuzz binary itself
 * (/proc/self/exe), mapped twice at two biases.  Whatever the bytes,
 * ivm_uunwind_dwarf must return NULL, stay inside its frame array, keep the
 * struct ivm_stack invariants, and stop.
 *
 * Input layout (little endian; short inputs are zero-padded):
 *   u8 cap (mod 64, +1)   u8 mode   u16 rsp_off   u32 pc_off
 *   u64 rbp   u64 rbx   u64 r12
 *   the rest: the stack image (up to 4 KiB) at STACK
 * mode: bit 0 la57; bit 1 stack words with bit 63 set become code
 * addresses (text + low 32 bits mod text size: so return addresses hit
 * real CFI rows); bit 2 words with bit 62 set become stack addresses
 * (STACK + low 12 bits: frame pointers and saved-rsp slots); bit 3 no
 * mappings (frame pointers only); bit 4 start pc in the second mapping;
 * bit 5 row cache off; bit 6 rbp is a stack address (STACK + rbp mod 4K);
 * bit 7 the CFI from "guest bytes" of the same file (uimage.h) whose
 * .eh_frame the guest does not hold: every row is absent, so callers are
 * found by the return-address scan, which reads the code before each
 * candidate (served from the file at its link-time addresses).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "unwind/uelf.h"
#include "unwind/uimage.h"
#include "unwind/uunwind_dwarf.h"

#define STACK 0x7ffd00000000ull
#define STACK_MAX 4096u
#define BIAS2 0x200000000ull

struct image {
	uint8_t bytes[STACK_MAX];
	size_t len;
};

static struct ivm_error *image_read(void *ctx, uint64_t va, void *buf,
				    size_t len)
{
	const struct image *im = ctx;

	if (va >= STACK && va - STACK <= im->len &&
	    len <= im->len - (va - STACK)) {
		memcpy(buf, im->bytes + (va - STACK), len);
		return NULL;
	}
	return ivm_error_fault(va, "fuzz image fault");
}

/* The fuzz binary's own file, for mode bit 7. */
static uint8_t *file_bytes;
static size_t file_size;
static struct ivm_uelf file_elf;
static uint64_t eh_lo, eh_hi;	/* .eh_frame's file offsets: not held */
static struct ivm_uimage *file_image;
static struct ivm_umapping image_maps[1];

static struct ivm_error *file_read(void *ctx, uint64_t off, void *buf,
				   size_t len)
{
	(void)ctx;
	if (off > file_size || len > file_size - off)
		return ivm_error_fault(off, "past the end");
	if (eh_hi && off < eh_hi && off + len > eh_lo)
		return ivm_error_fault(off, "not held");
	memcpy(buf, file_bytes + off, len);
	return NULL;
}

static const struct ivm_kmem_reader file_reader = { file_read, NULL };

/* The stack, then the file's code at its link-time addresses (bias 0). */
static struct ivm_error *image_or_code_read(void *ctx, uint64_t va,
					    void *buf, size_t len)
{
	struct ivm_error *err = image_read(ctx, va, buf, len);
	uint64_t off;

	if (!err || !ivm_uelf_offset(&file_elf, va, len, &off))
		return err;
	ivm_error_destroy(err);
	return file_read(NULL, off, buf, len);
}

static struct ivm_ubinary *binary;
static struct ivm_umapping maps[2];
static uint64_t text, text_size;
static bool cache_off;

static void setup_image(void)
{
	struct ivm_uelf_section sec;
	FILE *f = fopen("/proc/self/exe", "rb");

	if (!f || fseek(f, 0, SEEK_END))
		abort();
	file_size = (size_t)ftell(f);
	file_bytes = malloc(file_size);
	rewind(f);
	if (!file_bytes || fread(file_bytes, 1, file_size, f) != file_size)
		abort();
	fclose(f);
	if (ivm_uelf_parse(&file_reader, &file_elf) ||
	    ivm_uelf_find_section(&file_reader, &file_elf, ".eh_frame", &sec) ||
	    ivm_uimage_create(&file_reader, &file_image))
		abort();
	eh_lo = sec.offset;
	eh_hi = sec.offset + sec.size;
	image_maps[0] = maps[0];
	image_maps[0].binary = NULL;
	image_maps[0].image = file_image;
	image_maps[0].file = &file_reader;
}

static void setup(void)
{
	const struct ivm_ubinary_segment *seg;

	if (binary)
		return;
	if (ivm_ubinary_open("/proc/self/exe", &binary))
		abort();
	seg = ivm_ubinary_exec(binary, 0);
	text = seg->vaddr;
	text_size = seg->memsz;
	if (ivm_ubinary_mappings(binary, 0, &maps[0], 1) < 1 ||
	    ivm_ubinary_mappings(binary, BIAS2, &maps[1], 1) < 1)
		abort();
	setup_image();
}

static void check(const struct ivm_stack *st, uint32_t cap, uint64_t max)
{
	uint32_t reasons = st->flags & IVM_STACK_TRUNCATED_MASK;
	bool inexact = false;

	if (st->nr > cap || st->cap != cap)
		abort();
	if (reasons & (reasons - 1))
		abort();
	if (st->flags & (IVM_STACK_REACHED_USER | IVM_STACK_TRUNCATED_BOUNDS |
			 IVM_STACK_END_HINT))
		abort();
	if (st->fault_addr && !(st->flags & IVM_STACK_TRUNCATED_FAULT))
		abort();
	for (uint32_t i = 0; i < st->nr; i++) {
		const struct ivm_frame *f = &st->frames[i];

		if (!(f->flags & IVM_FRAME_USER) || f->pc < 4096 ||
		    f->pc >= max)
			abort();
		if (i && f->sp <= st->frames[i - 1].sp)
			abort();
		if (i && f->sp - st->frames[0].sp > IVM_UUNWIND_MAX_SPAN)
			abort();
		inexact |= (f->flags & IVM_FRAME_INEXACT) != 0;
	}
	if (st->nr && !(st->frames[0].flags & IVM_FRAME_REGS))
		abort();
	if (!!(st->flags & IVM_STACK_FP_FALLBACK) != inexact)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct image im;
	struct ivm_x86_regs regs = { .valid = IVM_X86_REGS_GPRS };
	struct ivm_kmem_reader reader = { image_read, &im };
	struct ivm_frame frames[64];
	struct ivm_stack st;
	struct ivm_cursor c;
	unsigned int cap, mode;
	uint16_t rsp_off;
	uint32_t pc_off;
	uint64_t max;

	setup();
	ivm_cursor_init(&c, data, size);
	cap = ivm_get_u8(&c) % 64 + 1;
	mode = ivm_get_u8(&c);
	rsp_off = ivm_get_u16(&c);
	pc_off = ivm_get_u32(&c);
	regs.rbp = ivm_get_u64(&c);
	regs.rbx = ivm_get_u64(&c);
	regs.r12 = ivm_get_u64(&c);
	if (c.bad) {
		c.left = 0;
		c.p = data + size;
	}
	im.len = c.left < STACK_MAX ? c.left : STACK_MAX;
	memcpy(im.bytes, c.p, im.len);
	for (size_t off = 0; off + 8 <= im.len; off += 8) {
		uint64_t w;

		memcpy(&w, im.bytes + off, 8);
		if ((mode & 2) && (w >> 63))
			w = text + (w & 0xffffffffu) % text_size;
		else if ((mode & 4) && (w >> 62))
			w = STACK + (w & 0xfff);
		memcpy(im.bytes + off, &w, 8);
	}
	regs.rip = text + pc_off % text_size + ((mode & 0x10) ? BIAS2 : 0);
	regs.rsp = STACK + rsp_off % STACK_MAX;
	if (mode & 0x40)
		regs.rbp = STACK + regs.rbp % STACK_MAX;
	if (cache_off != !!(mode & 0x20)) {
		/* emptying the cache costs a memset: only on a change */
		cache_off = !!(mode & 0x20);
		ivm_ubinary_set_cache(binary, !cache_off);
	}

	max = (mode & 1) ? IVM_USER_ADDR_MAX_LA57 : IVM_USER_ADDR_MAX;
	ivm_stack_init(&st, frames, cap);
	if (mode & 0x80) {
		struct ivm_kmem_reader code = { image_or_code_read, &im };

		regs.rip = text + pc_off % text_size;
		if (ivm_uunwind_dwarf(&code, &regs, mode & 1, image_maps, 1,
				      &st))
			abort();
	} else if (ivm_uunwind_dwarf(&reader, &regs, mode & 1, maps,
				     (mode & 8) ? 0 : 2, &st)) {
		abort();
	}
	check(&st, cap, max);
	return 0;
}
