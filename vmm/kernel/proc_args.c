// SPDX-License-Identifier: MIT
#include <stddef.h>
#include <string.h>

#include "base/bytes.h"
#include "kernel/proc_args.h"

/* TASK_SIZE_MAX of x86-64, 4- and 5-level paging (one page below 2^47/56). */
#define USER_END 0x00007ffffffff000ull
#define USER_END_LA57 0x00fffffffffff000ull
#define PAGE_4K 4096u

#define FIELD(path, field)                                                    \
	{ "mm_struct", path, 8, offsetof(struct ivm_proc_args_offsets, field), \
	  false }

static const struct ivm_btf_field_spec fields[] = {
	FIELD("arg_start", arg_start),
	FIELD("arg_end", arg_end),
	FIELD("env_start", env_start),
	FIELD("env_end", env_end),
};

struct ivm_error *ivm_proc_args_offsets_from_btf(
	const struct ivm_btf *btf, struct ivm_proc_args_offsets *ret)
{
	return ivm_btf_offsets_find(btf, fields,
				    sizeof(fields) / sizeof(fields[0]), ret);
}

/* [va, va + len) into buf as far as it goes; returns the bytes read. */
static size_t read_prefix(const struct ivm_kmem_reader *umem, uint64_t va,
			  char *buf, size_t len)
{
	struct ivm_error *err;
	size_t got;

	err = ivm_kmem_read_upto(umem, va, buf, len, &got);
	if (err) {
		ivm_error_destroy(err);
		return 0;
	}
	return got;
}

struct ivm_error *ivm_proc_args_read(const struct ivm_kmem_reader *kmem,
				     const struct ivm_proc_args_offsets *off,
				     uint64_t mm, const struct ivm_kmem_reader *umem,
				     int la57, char *buf, size_t cap,
				     struct ivm_proc_args *ret)
{
	uint64_t arg_start, arg_end, env_start, env_end, end, limit;
	uint64_t user_end = la57 ? USER_END_LA57 : USER_END;
	uint8_t p[8];
	struct ivm_error *err;
	size_t want, got;
	char last;

	memset(ret, 0, sizeof(*ret));
	if (cap > IVM_PROC_ARGS_MAX)
		cap = IVM_PROC_ARGS_MAX;
	if (!mm || !cap)
		return NULL;
#define READ_PTR(field, var)						\
	do {								\
		err = kmem->read(kmem->ctx, mm + off->field, p, 8);	\
		if (err)						\
			return err;					\
		var = ivm_le64(p);					\
	} while (0)
	READ_PTR(arg_start, arg_start);
	READ_PTR(arg_end, arg_end);
	READ_PTR(env_start, env_start);
	READ_PTR(env_end, env_end);
#undef READ_PTR
	/* As the kernel: no env_end yet, or no arguments, is no command line. */
	if (!env_end || arg_start >= arg_end)
		return NULL;
	if (arg_end > user_end || (env_end > user_end && env_start == arg_end))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"mm %#llx: arguments end at %#llx, outside user memory",
					(unsigned long long)mm,
					(unsigned long long)arg_end);
	/* A title may run on into the environment, and only there. */
	if (env_start != arg_end || env_end < env_start)
		env_start = env_end = arg_end;

	/*
	 * The common case in one read: the arguments up to the cap, whose
	 * last byte says whether a title was written over them.
	 */
	want = arg_end - arg_start < cap ? (size_t)(arg_end - arg_start) : cap;
	got = read_prefix(umem, arg_start, buf, want);
	if (want == arg_end - arg_start) {
		last = got == want ? buf[want - 1] : 0;
		if (got < want) {
			/* The kernel reads that byte alone: so do we. */
			err = umem->read(umem->ctx, arg_end - 1, &last, 1);
			if (err) {
				ivm_error_destroy(err);
				last = 0;
			}
		}
	} else {
		err = umem->read(umem->ctx, arg_end - 1, &last, 1);
		if (err) {
			ivm_error_destroy(err);
			last = 0;
		}
	}
	if (!last) {
		ret->len = got;
		ret->truncated = got < arg_end - arg_start;
		return NULL;
	}

	/* A title: up to its first NUL, within a page and env_end. */
	ret->title = true;
	end = env_end - arg_start < PAGE_4K ? env_end : arg_start + PAGE_4K;
	limit = end - arg_start < cap ? end - arg_start : cap;
	if (limit > got)
		got += read_prefix(umem, arg_start + got, buf + got,
				   (size_t)limit - got);
	want = strnlen(buf, got);
	if (want < got) {
		ret->len = want + 1;	/* the NUL, as the kernel gives it */
	} else {
		ret->len = got;
		ret->truncated = got < end - arg_start;
	}
	return NULL;
}

size_t ivm_proc_args_display(const char *raw, size_t len, char *out,
			     size_t out_size)
{
	size_t i, n;

	/* ps drops the trailing NULs, then turns the rest into spaces. */
	while (len && !raw[len - 1])
		len--;
	n = len < out_size - 1 ? len : out_size - 1;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)raw[i];

		if (c == '\0' || c == '\n')
			out[i] = ' ';
		else if (c < 0x20 || c >= 0x7f)
			out[i] = '?';
		else
			out[i] = (char)c;
	}
	out[n] = '\0';
	return n;
}
