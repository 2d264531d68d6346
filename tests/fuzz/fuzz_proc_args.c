// SPDX-License-Identifier: MIT
/*
 * A process's command line from a hostile guest (kernel/proc_args.h), and
 * the profile's META item that carries it (profile/proc_info.h).
 *
 * Input: a flag byte, then mm_struct's arg_start, arg_end, env_start,
 * env_end (4 x 8 bytes, little-endian): with flag bit 0 each is an offset
 * into the user memory below (the usual case, so reads land), else taken
 * as it is; then a cap (2 bytes); then the process's user memory, mapped
 * at FUZZ_USER.  The text read is displayed as ps would, formatted as a
 * META value and parsed back.  The same input is also parsed as a META
 * value directly, and read as kernel memory at FUZZ_MM holding a kernel
 * thread's task_struct, struct kthread and struct worker, for its name.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "fuzz_image.h"
#include "kernel/proc_args.h"
#include "kernel/task_name.h"
#include "profile/proc_info.h"

#define FUZZ_MM 0xffff888000100000ull
#define FUZZ_USER 0x7ffff0000000ull
#define HEADER (1 + 32 + 2)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct ivm_proc_args_offsets off = { 0, 8, 16, 24 };
	struct fuzz_image mm, user;
	struct ivm_proc_args args;
	struct ivm_proc_info info, back;
	struct ivm_error *err;
	uint8_t mm_bytes[32];
	char raw[IVM_PROC_ARGS_MAX], value[IVM_TITLE_MAX + 64], *text;
	size_t cap, i, n;
	uint32_t pid;

	if (size < HEADER)
		return 0;
	for (i = 0; i < 4; i++) {
		uint64_t v = ivm_le64(data + 1 + 8 * i);

		if (data[0] & 1)
			v = FUZZ_USER + (v & 0xffff);
		memcpy(mm_bytes + 8 * i, &v, 8);
	}
	cap = ivm_le_load(data + 33, 2) % (IVM_PROC_ARGS_MAX + 2);
	if (!fuzz_image_init(&mm, FUZZ_MM, mm_bytes, sizeof(mm_bytes)))
		return 0;
	if (!fuzz_image_init(&user, FUZZ_USER, data + HEADER, size - HEADER)) {
		fuzz_image_fini(&mm);
		return 0;
	}
	err = ivm_proc_args_read(&mm.reader, &off, FUZZ_MM, &user.reader,
				 data[0] & 2, raw, cap < sizeof(raw) ? cap :
						   sizeof(raw), &args);
	if (!err) {
		if (args.len > cap || args.len > sizeof(raw))
			abort();
		memset(&info, 0, sizeof(info));
		n = ivm_proc_args_display(raw, args.len, info.title,
					  sizeof(info.title));
		if (n != strlen(info.title))
			abort();
		for (i = 0; i < n; i++)
			if ((unsigned char)info.title[i] < 0x20 ||
			    (unsigned char)info.title[i] >= 0x7f)
				abort();
		memcpy(info.comm, "fuzz", 5);
		ivm_proc_info_format(7, &info, value, sizeof(value));
		err = ivm_proc_info_parse(value, &pid, &back);
		if (err || pid != 7 || strcmp(back.title, info.title))
			abort();
	}
	ivm_error_destroy(err);
	fuzz_image_fini(&mm);
	fuzz_image_fini(&user);

	/* The whole input as kernel memory: a kernel thread's name. */
	if (fuzz_image_init(&mm, FUZZ_MM, data, size)) {
		static const struct ivm_task_name_offsets names = {
			.task_kthread = 8, .kthread_full_name = 16,
			.kthread_data = 24, .worker_desc = 32,
			.worker_desc_size = 24, .worker_current_work = 40,
			.worker_pool = 48,
		};
		char name[IVM_TASK_NAME_MAX];

		ivm_task_name(&mm.reader, 0, &names, FUZZ_MM, "fuzz",
			      IVM_GUEST_PF_KTHREAD |
			      (data[0] & 4 ? IVM_GUEST_PF_WQ_WORKER : 0),
			      name, sizeof(name));
		if (strlen(name) >= sizeof(name))
			abort();
		fuzz_image_fini(&mm);
	}

	/* The whole input as a META value from a hostile profile file. */
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	err = ivm_proc_info_parse(text, &pid, &back);
	if (!err && (strlen(back.comm) >= sizeof(back.comm) ||
		     strlen(back.title) >= sizeof(back.title)))
		abort();
	ivm_error_destroy(err);
	free(text);
	return 0;
}
