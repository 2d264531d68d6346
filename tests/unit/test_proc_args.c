// SPDX-License-Identifier: MIT
/*
 * A process's command line and name from guest memory (kernel/proc_args,
 * profile/proc_info), on synthetic memory laid out as the kernel and exec
 * leave it: the arguments and the environment back to back at the top of
 * the stack, pointed at by mm_struct's arg_start..env_end; and the META
 * items that carry them in a profile.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernel/proc_args.h"
#include "kernel/task_name.h"
#include "profile/profile_file.h"
#include "profile/proc_info.h"
#include "synth_mm.h"
#include "tmp_files.h"

#define MM 0xffff888000200000ull
#define TASK 0xffff888000300000ull
#define LEADER 0xffff888000400000ull
#define STACK_TOP 0x7ffffffff000ull
#define ARGS (STACK_TOP - 3 * 4096ull)	/* three pages of strings */

static const struct ivm_proc_args_offsets off = {
	.arg_start = 0x100, .arg_end = 0x108, .env_start = 0x110,
	.env_end = 0x118,
};

static struct skm *k;

static void setup(void)
{
	k = calloc(1, sizeof(*k));
	cr_assert(k);
	skm_init(k);
	skm_region_at(k, MM, 4096);
	skm_region_at(k, TASK, 4096);
	skm_region_at(k, LEADER, 4096);
	skm_region_at(k, ARGS, 4096);
	skm_region_at(k, ARGS + 4096, 4096);
	skm_region_at(k, ARGS + 8192, 4096);
}

static void teardown(void)
{
	skm_fini(k);
	free(k);
}

TestSuite(proc_args, .init = setup, .fini = teardown);

/* s with its NUL at p, which may cross pages; returns the end. */
static uint64_t put_string(uint64_t p, const char *s)
{
	size_t i;

	for (i = 0; i <= strlen(s); i++)
		skm_w8(k, p + i, (uint8_t)s[i]);
	return p + i;
}

/*
 * Lay out argv then envp (each a list of NUL-terminated strings) at addr
 * and point mm at them; returns arg_end.
 */
static uint64_t lay_out(uint64_t addr, const char *const *argv, size_t argc,
			const char *const *envp, size_t envc)
{
	uint64_t p = addr, arg_end;
	size_t i;

	for (i = 0; i < argc; i++)
		p = put_string(p, argv[i]);
	arg_end = p;
	for (i = 0; i < envc; i++)
		p = put_string(p, envp[i]);
	skm_w64(k, MM + off.arg_start, addr);
	skm_w64(k, MM + off.arg_end, arg_end);
	skm_w64(k, MM + off.env_start, arg_end);
	skm_w64(k, MM + off.env_end, p);
	return arg_end;
}

static struct ivm_proc_args read_args(char *buf, size_t cap)
{
	struct ivm_kmem_reader r = { skm_read, k };
	struct ivm_proc_args a;

	cr_assert_null(ivm_proc_args_read(&r, &off, MM, &r, 0, buf, cap, &a));
	return a;
}

static const char *shown(const char *raw, size_t len)
{
	static char out[IVM_PROC_ARGS_MAX + 1];

	ivm_proc_args_display(raw, len, out, sizeof(out));
	return out;
}

static const char *const env[] = { "HOME=/", "TERM=linux" };

Test(proc_args, arguments_as_cmdline_and_ps)
{
	static const char *const argv[] = { "/usr/sbin/redis-server",
					    "127.0.0.1:6379" };
	char buf[IVM_PROC_ARGS_MAX];
	struct ivm_proc_args a;

	lay_out(ARGS + 100, argv, 2, env, 2);
	a = read_args(buf, sizeof(buf));
	cr_assert_eq(a.len, strlen(argv[0]) + 1 + strlen(argv[1]) + 1);
	cr_assert(!a.title && !a.truncated);
	cr_assert(!memcmp(buf, "/usr/sbin/redis-server\0" "127.0.0.1:6379\0",
			  a.len));
	cr_assert_str_eq(shown(buf, a.len),
			 "/usr/sbin/redis-server 127.0.0.1:6379");
}

Test(proc_args, title_over_arguments_padded_with_nuls)
{
	/* nginx: the title written over argv[0], the rest zeroed. */
	static const char *const argv[] = { "nginx: worker process", "", "",
					    "", "" };
	char buf[IVM_PROC_ARGS_MAX];
	struct ivm_proc_args a;

	lay_out(ARGS, argv, 5, env, 2);
	a = read_args(buf, sizeof(buf));
	cr_assert(!a.title, "its last byte is a NUL: the arguments as they are");
	cr_assert_str_eq(shown(buf, a.len), "nginx: worker process");
}

Test(proc_args, title_running_on_into_the_environment)
{
	static const char *const argv[] = { "php-fpm", "-F" };
	static const char title[] = "php-fpm: pool www with a long name";
	char buf[IVM_PROC_ARGS_MAX];
	struct ivm_proc_args a;

	static const char *const long_env[] = { "HOME=/", "TERM=linux",
						"PATH=/usr/bin:/bin" };

	lay_out(ARGS, argv, 2, long_env, 3);
	/* setproctitle: over argv and on into envp, NUL-terminated there. */
	put_string(ARGS, title);
	a = read_args(buf, sizeof(buf));
	cr_assert(a.title);
	cr_assert_eq(a.len, sizeof(title), "up to and with its NUL");
	cr_assert_str_eq(shown(buf, a.len), title);
}

Test(proc_args, title_only_into_an_adjacent_environment)
{
	static const char *const argv[] = { "abc", "def" };
	char buf[IVM_PROC_ARGS_MAX];
	struct ivm_proc_args a;
	uint64_t arg_end = lay_out(ARGS, argv, 2, env, 2);

	/*
	 * Its last NUL overwritten, but the environment is elsewhere: a
	 * title within the arguments, up to its first NUL (as the kernel).
	 */
	skm_w8(k, arg_end - 1, 'X');
	skm_w64(k, MM + off.env_start, arg_end + 64);
	a = read_args(buf, sizeof(buf));
	cr_assert(a.title);
	cr_assert_eq(a.len, 4, "%zu", a.len);
	cr_assert_str_eq(shown(buf, a.len), "abc");
	/* No NUL at all: everything up to arg_end, not past it. */
	skm_w8(k, ARGS + 3, '-');
	a = read_args(buf, sizeof(buf));
	cr_assert_eq(a.len, 8, "%zu", a.len);
	cr_assert_str_eq(shown(buf, a.len), "abc-defX");
}

Test(proc_args, an_unreadable_page_truncates)
{
	static char long_arg[6000];
	const char *argv[] = { "/bin/x", long_arg };
	char buf[IVM_PROC_ARGS_MAX];
	struct ivm_proc_args a;

	memset(long_arg, 'a', sizeof(long_arg) - 1);
	lay_out(ARGS, argv, 2, env, 2);
	skm_poison(k, ARGS + 4096);
	a = read_args(buf, sizeof(buf));
	cr_assert(a.truncated);
	cr_assert_eq(a.len, 4096, "the first page only: %zu", a.len);
}

Test(proc_args, the_cap_truncates)
{
	static const char *const argv[] = { "/bin/lockstorm", "--threads",
					    "4" };
	char buf[8];
	struct ivm_proc_args a;

	lay_out(ARGS, argv, 3, env, 2);
	a = read_args(buf, sizeof(buf));
	cr_assert(a.truncated && !a.title);
	cr_assert_eq(a.len, 8);
	cr_assert_str_eq(shown(buf, a.len), "/bin/loc");
}

Test(proc_args, none_before_exec_is_done)
{
	static const char *const argv[] = { "x" };
	char buf[64];
	struct ivm_proc_args a;

	lay_out(ARGS, argv, 1, env, 2);
	skm_w64(k, MM + off.env_end, 0);
	a = read_args(buf, sizeof(buf));
	cr_assert_eq(a.len, 0);
	lay_out(ARGS, argv, 1, env, 2);
	skm_w64(k, MM + off.arg_end, ARGS);
	a = read_args(buf, sizeof(buf));
	cr_assert_eq(a.len, 0);
}

Test(proc_args, hostile_pointers_are_refused)
{
	struct ivm_kmem_reader r = { skm_read, k };
	static const char *const argv[] = { "x" };
	struct ivm_proc_args a;
	struct ivm_error *err;
	char buf[64];

	lay_out(ARGS, argv, 1, env, 2);
	skm_w64(k, MM + off.arg_end, 0xffff888000000000ull);
	err = ivm_proc_args_read(&r, &off, MM, &r, 0, buf, sizeof(buf), &a);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	/* An mm_struct that cannot be read is the reader's error. */
	err = ivm_proc_args_read(&r, &off, 0xffff888000900000ull, &r, 0, buf,
				 sizeof(buf), &a);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_FAULT);
	ivm_error_destroy(err);
}

Test(proc_args, display_as_ps)
{
	static const char raw[] = "a\0b\nc\x01\xe9\0\0";
	char out[64];

	cr_assert_eq(ivm_proc_args_display(raw, sizeof(raw) - 1, out,
					   sizeof(out)), 7);
	cr_assert_str_eq(out, "a b c??");
	cr_assert_eq(ivm_proc_args_display(raw, sizeof(raw) - 1, out, 3), 2);
	cr_assert_str_eq(out, "a ");
	cr_assert_eq(ivm_proc_args_display("\0\0", 2, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "");
}

/* ---- the process of a capture (proc_info) ------------------------------- */

static struct ivm_proc_info_cache cache;

static void cache_setup(void)
{
	static const char *const argv[] = { "php-fpm: pool www", "" };

	memset(&cache, 0, sizeof(cache));
	cache.args = off;
	cache.group_leader = 0x40;
	cache.comm = 0x80;
	cache.comm_size = 16;
	lay_out(ARGS, argv, 2, env, 2);
	skm_w64(k, TASK + 0x40, LEADER);
	memcpy(skm_at(k, LEADER + 0x80, 16), "php-fpm8.2\0\0\0\0\0", 16);
}

Test(proc_args, a_threads_process_by_its_leader_cached)
{
	struct ivm_kmem_reader r = { skm_read, k };
	struct ivm_proc_info_task t = {
		.addr = TASK, .pid = 12, .tgid = 10, .comm = "worker-thread",
		.mm = MM, .cr3 = 0x1000,
	};
	struct ivm_proc_info info;
	unsigned long reads;

	cache_setup();
	ivm_proc_info_cache_get(&cache, &r, &r, 0, &t, 1000, &info);
	cr_assert_str_eq(info.comm, "php-fpm8.2");
	cr_assert_str_eq(info.title, "php-fpm: pool www");
	reads = k->reads;
	ivm_proc_info_cache_get(&cache, &r, &r, 0, &t, 2000, &info);
	cr_assert_eq(k->reads, reads, "a second capture reads nothing");
	cr_assert_str_eq(info.title, "php-fpm: pool www");
	ivm_proc_info_cache_get(&cache, &r, &r, 0, &t,
				1000 + IVM_PROC_INFO_REFRESH_NS, &info);
	cr_assert_gt(k->reads, reads, "read again once stale");
	cr_assert_eq(cache.hits, 1);
	cr_assert_eq(cache.reads, 2);
}

Test(proc_args, unreadable_leader_is_not_cached)
{
	struct ivm_kmem_reader r = { skm_read, k };
	struct ivm_proc_info_task t = {
		.addr = TASK, .pid = 12, .tgid = 10, .comm = "w",
		.mm = MM, .cr3 = 0x1000,
	};
	struct ivm_proc_info info;

	cache_setup();
	/* A group_leader that is no kernel address is not followed. */
	skm_w64(k, TASK + 0x40, 0x1234);
	ivm_proc_info_cache_get(&cache, &r, &r, 0, &t, 1000, &info);
	cr_assert_str_eq(info.comm, "");
	cr_assert_eq(cache.failures, 1);
	skm_w64(k, TASK + 0x40, LEADER);
	ivm_proc_info_cache_get(&cache, &r, &r, 0, &t, 1001, &info);
	cr_assert_str_eq(info.comm, "php-fpm8.2", "tried again at once");
}

Test(proc_args, meta_item_round_trip)
{
	struct ivm_proc_info in = { .comm = "a\tb", .title = "x\ty z" };
	struct ivm_proc_info out;
	struct ivm_error *err;
	char buf[512];
	uint32_t pid;

	ivm_proc_info_format(4242, &in, buf, sizeof(buf));
	cr_assert_str_eq(buf, "4242\ta?b\tx?y z");
	cr_assert_null(ivm_proc_info_parse(buf, &pid, &out));
	cr_assert_eq(pid, 4242);
	cr_assert_str_eq(out.comm, "a?b");
	cr_assert_str_eq(out.title, "x?y z");
	cr_assert_null(ivm_proc_info_parse("7\tc\t", &pid, &out));
	cr_assert_str_eq(out.title, "");
	/* A comm too long is cut to TASK_COMM_LEN. */
	cr_assert_null(ivm_proc_info_parse("7\t0123456789abcdefXYZ\tt", &pid,
					   &out));
	cr_assert_str_eq(out.comm, "0123456789abcde");
	cr_assert_str_eq(out.title, "t");
	err = ivm_proc_info_parse("x\ty\tz", &pid, &out);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	err = ivm_proc_info_parse("99999999999\tc\tt", &pid, &out);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	err = ivm_proc_info_parse("7\tno title field", &pid, &out);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
}

Test(proc_args, table_says_each_change_once)
{
	struct ivm_proc_info a = { .comm = "nginx",
				   .title = "nginx: worker process" };
	struct ivm_proc_info b = { .comm = "nginx",
				   .title = "nginx: master process" };
	struct ivm_proc_table *t;

	cr_assert_null(ivm_proc_table_create(&t));
	cr_assert_null(ivm_proc_table_get(t, 5));
	cr_assert(ivm_proc_table_set(t, 5, &a));
	cr_assert(!ivm_proc_table_set(t, 5, &a));
	cr_assert(ivm_proc_table_set(t, 6, &a));
	cr_assert(ivm_proc_table_set(t, 5, &b), "a new title is said");
	cr_assert_str_eq(ivm_proc_table_get(t, 5)->title, b.title);
	cr_assert_str_eq(ivm_proc_table_get(t, 6)->title, a.title);
	ivm_proc_table_destroy(t);
}

/*
 * The table grows with the processes said (a fork storm's thousands) and
 * keeps each; past IVM_PROC_INFO_MAX it starts again (each then said anew).
 */
Test(proc_args, table_grows_then_starts_again_at_its_bound)
{
	struct ivm_proc_info a = { .comm = "sh", .title = "sh -c true" };
	struct ivm_proc_table *t;
	uint32_t pid;

	cr_assert_null(ivm_proc_table_create(&t));
	for (pid = 1; pid <= IVM_PROC_INFO_MAX; pid++)
		cr_assert(ivm_proc_table_set(t, pid * 7, &a), "pid %u", pid);
	cr_assert_eq(ivm_proc_table_count(t), IVM_PROC_INFO_MAX);
	for (pid = 1; pid <= IVM_PROC_INFO_MAX; pid++) {
		cr_assert_not_null(ivm_proc_table_get(t, pid * 7), "pid %u",
				   pid);
		cr_assert(!ivm_proc_table_set(t, pid * 7, &a));
	}
	cr_assert_null(ivm_proc_table_get(t, 8));
	cr_assert(ivm_proc_table_set(t, 8, &a));
	cr_assert_eq(ivm_proc_table_count(t), 1);
	cr_assert_null(ivm_proc_table_get(t, 7));
	cr_assert(ivm_proc_table_set(t, 7, &a), "said again");
	ivm_proc_table_destroy(t);
}

/* Removed by the test's fini, which runs after a failed assertion too. */
static char procs_path[] = "/tmp/ivm-test-procs-XXXXXX";

static void unlink_procs(void)
{
	if (IVM_TMP_MADE(procs_path))
		unlink(procs_path);
}

Test(proc_args, announced_in_the_file_before_the_samples,
     .fini = unlink_procs)
{
	char *path = procs_path;
	struct ivm_proc_info a = { .comm = "nginx",
				   .title = "nginx: worker process" };
	struct ivm_profile_writer *w;
	struct ivm_profile_reader *r;
	struct ivm_profile_record rec;
	struct ivm_proc_table *wt, *rt;
	uint64_t s = 0;
	int fd = mkstemp(path), meta = 0;

	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_null(ivm_proc_table_create(&wt));
	cr_assert_null(ivm_proc_table_create(&rt));
	cr_assert_null(ivm_profile_writer_create(path, &w));
	for (int i = 0; i < 3; i++) {
		struct ivm_sample smp = { .pid = 5, .tid = 5, .comm = "nginx" };

		cr_assert_null(ivm_proc_table_announce(wt, w, 5, &a));
		cr_assert_null(ivm_profile_write_sample(w, &smp));
	}
	cr_assert_null(ivm_profile_writer_finish(w, 1, NULL, 0));
	cr_assert_null(ivm_profile_reader_open(path, &r));
	while (ivm_profile_reader_next(r, &rec)) {
		struct ivm_proc_info info;
		uint32_t pid;

		if (rec.type == IVM_RECORD_META &&
		    !strcmp(rec.meta.items[0].key, IVM_META_PROCESS)) {
			meta++;
			cr_assert_null(ivm_proc_info_parse(
				rec.meta.items[0].value, &pid, &info));
			ivm_proc_table_set(rt, pid, &info);
		} else if (rec.type == IVM_RECORD_SAMPLE) {
			s++;
			cr_assert_not_null(ivm_proc_table_get(rt, 5));
			cr_assert_str_eq(ivm_proc_table_get(rt, 5)->title,
					 a.title);
		}
	}
	cr_assert_eq(meta, 1, "said once");
	cr_assert_eq(s, 3);
	ivm_profile_reader_destroy(r);
	ivm_proc_table_destroy(wt);
	ivm_proc_table_destroy(rt);
}

/* ---- a kernel thread's name as /proc shows it (task_name) --------------- */

#define KTHREAD 0xffff888000500000ull
#define WORKER 0xffff888000600000ull
#define STRINGS 0xffff888000700000ull

static const struct ivm_task_name_offsets names = {
	.task_kthread = 0x50, .kthread_full_name = 0x68, .kthread_data = 0x18,
	.worker_desc = 0x74, .worker_desc_size = 24, .worker_current_work = 0x10,
	.worker_pool = 0x48,
};

static const char *name_of(const char *comm, uint32_t flags)
{
	static char buf[IVM_TASK_NAME_MAX];
	struct ivm_kmem_reader r = { skm_read, k };

	return ivm_task_name(&r, 0, &names, TASK, comm, flags, buf,
			     sizeof(buf));
}

Test(proc_args, kernel_thread_names)
{
	static const char full[] = "rcu_tasks_rude_kthread";

	skm_region_at(k, KTHREAD, 4096);
	skm_region_at(k, WORKER, 4096);
	skm_region_at(k, STRINGS, 4096);
	skm_w64(k, TASK + names.task_kthread, KTHREAD);
	skm_w64(k, KTHREAD + names.kthread_full_name, STRINGS);
	memcpy(skm_at(k, STRINGS, sizeof(full)), full, sizeof(full));
	cr_assert_str_eq(name_of("rcu_tasks_rude_", IVM_GUEST_PF_KTHREAD),
			 full);
	/* A user task is its comm, whatever its pointers say. */
	cr_assert_str_eq(name_of("bash", 0), "bash");
	/* No full name: the comm. */
	skm_w64(k, KTHREAD + names.kthread_full_name, 0);
	cr_assert_str_eq(name_of("kthreadd", IVM_GUEST_PF_KTHREAD), "kthreadd");

	/* A workqueue worker in a pool: comm, '-' or '+', its desc. */
	skm_w64(k, KTHREAD + names.kthread_data, WORKER);
	skm_w64(k, WORKER + names.worker_pool, WORKER + 0x800);
	memcpy(skm_at(k, WORKER + names.worker_desc, 7), "events", 7);
	cr_assert_str_eq(name_of("kworker/0:1", IVM_GUEST_PF_KTHREAD |
				 IVM_GUEST_PF_WQ_WORKER),
			 "kworker/0:1-events");
	skm_w64(k, WORKER + names.worker_current_work, WORKER + 0x900);
	cr_assert_str_eq(name_of("kworker/0:1", IVM_GUEST_PF_KTHREAD |
				 IVM_GUEST_PF_WQ_WORKER),
			 "kworker/0:1+events");
	/* A desc without NUL is cut at its size. */
	memset(skm_at(k, WORKER + names.worker_desc, 24), 'x', 24);
	cr_assert_eq(strlen(name_of("kworker/0:1", IVM_GUEST_PF_KTHREAD |
				    IVM_GUEST_PF_WQ_WORKER)),
		     strlen("kworker/0:1+") + 24);
	/* A rescuer outside any pool: its comm. */
	skm_w64(k, WORKER + names.worker_pool, 0);
	cr_assert_str_eq(name_of("scsi_tmf_1", IVM_GUEST_PF_KTHREAD |
				 IVM_GUEST_PF_WQ_WORKER), "scsi_tmf_1");
	/* A struct kthread pointer that is no kernel address: the comm. */
	skm_w64(k, TASK + names.task_kthread, 0x1000);
	cr_assert_str_eq(name_of("kworker/0:1", IVM_GUEST_PF_KTHREAD |
				 IVM_GUEST_PF_WQ_WORKER), "kworker/0:1");
}
