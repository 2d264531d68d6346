// SPDX-License-Identifier: MIT
/*
 * Fuzz target: a hostile guest kernel's data, through the kernel layout
 * (slide search, per-CPU offsets, current, the task and thread lists) and
 * the module list (kmodules.h), whose every module must come back as
 * profile lines the report's reader takes.
 *
 * Structure-aware: a valid synthetic guest (page tables, a kernel image at a
 * slide, two CPUs, six tasks) is built once; each input is a list of 10-byte
 * patches (u16 slot, u64 value) written over 8-byte slots of the guest's
 * data, so the fuzzer corrupts pointers, counts and lists of an otherwise
 * well-formed kernel instead of hoping random bytes form page tables.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "kernel/kernel_layout.h"
#include "kernel/kmodules.h"
#include "kernel/last_ran.h"

#define SLIDE 0x2a00000ull
#define POB 0xffff9a4000000000ull
#define A_SIZE (1ull << 20)
#define B_GPA (0x1200000ull + SLIDE)
#define B_SIZE (2ull << 20)
#define LINK 0xffffffff81200000ull
#define KVA(off) (LINK + SLIDE + (off))
#define DM(pa) (POB + (pa))
/* Kernel image layout (offsets from LINK). */
#define K_BANNER 0x0
#define K_INIT_TASK 0x1000
#define K_PGT 0x100000
#define K_VARS 0x101000		/* per_cpu_offset[2], nr_cpu_ids, ... */
/* Region A layout. */
#define A_PDPT_K 0x2000
#define A_PD_K 0x3000
#define A_PDPT_D 0x4000
#define A_DATA 0x10000		/* per-CPU areas, tasks, signals: fuzzed */
#define A_PCPU(c) (A_DATA + (c) * 0x1000)
#define A_TASK(i) (A_DATA + 0x2000 + (i) * 0x400)
#define A_SIGNAL(i) (A_DATA + 0x4000 + (i) * 0x40)
#define A_DATA_END (A_DATA + 0x5000)
/* Two modules, their section attributes, names and build-id note. */
#define A_MODS A_DATA_END
#define A_MOD(i) (A_MODS + (i) * 0x200)
#define A_SECT(i) (A_MODS + 0x400 + (i) * 0x100)
#define A_STR(i) (A_MODS + 0x600 + (i) * 0x40)
#define A_NOTE (A_MODS + 0x800)
#define A_MODS_END (A_MODS + 0x900)
#define BANNER "Linux version 6.1.0-fuzz\n"

static uint8_t base_a[A_SIZE], base_b[B_SIZE];
static uint8_t *mem_a, *mem_b;
static struct ivm_btf *btf;
static struct ivm_ksyms *ksyms;
static struct ivm_kernel_offsets off;

static uint8_t *at(uint64_t va)
{
	if (va >= POB && va < POB + A_SIZE)
		return base_a + (va - POB);
	return base_b + (va - KVA(0));
}

static void w64(uint64_t va, uint64_t v)
{
	memcpy(at(va), &v, 8);
}

static void w32(uint64_t va, uint32_t v)
{
	memcpy(at(va), &v, 4);
}

static unsigned int idx(uint64_t va, int level)
{
	return (unsigned int)(va >> (12 + 9 * (level - 1))) & 511;
}

static void pte(uint8_t *table, unsigned int i, uint64_t v)
{
	memcpy(table + i * 8, &v, 8);
}

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

struct field {
	const char *name;
	int type;
	uint32_t off;		/* bytes */
};

static int add_struct(struct btf *b, const char *name, uint32_t size,
		      const struct field *f, size_t n)
{
	int id = btf__add_struct(b, name, size);
	size_t i;

	for (i = 0; i < n; i++)
		btf__add_field(b, f[i].name, f[i].type, f[i].off * 8, 0);
	return id;
}

#define ADD_STRUCT(b, name, size, ...) ({				\
	const struct field f_[] = { __VA_ARGS__ };			\
	add_struct(b, name, size, f_, sizeof(f_) / sizeof(f_[0]));	\
})

/*
 * struct module as 6.1 has it, in the parts the walk reads: core_layout,
 * sect_attrs with its flexible array of attributes, arch's ORC tables.
 */
static void build_module_btf(struct btf *b, int t_int, int t_uint,
			     int t_ulong, int t_char, int t_ptr, int t_list)
{
	int t_name = btf__add_array(b, t_int, t_char, 56);
	int t_layout = ADD_STRUCT(b, "module_layout", 16,
				  { "base", t_ptr, 0 }, { "size", t_uint, 8 });
	int t_arch = ADD_STRUCT(b, "mod_arch_specific", 24,
				{ "num_orcs", t_uint, 0 },
				{ "orc_unwind_ip", t_ptr, 8 },
				{ "orc_unwind", t_ptr, 16 });
	int t_attr, t_battr, t_sattr;

	ADD_STRUCT(b, "module", 0x200, { "state", t_int, 0 },
		   { "list", t_list, 0x8 }, { "name", t_name, 0x18 },
		   { "sect_attrs", t_ptr, 0x60 },
		   { "core_layout", t_layout, 0x70 },
		   { "arch", t_arch, 0x90 });
	t_attr = ADD_STRUCT(b, "attribute", 16, { "name", t_ptr, 0 },
			    { "mode", t_uint, 8 });
	t_battr = ADD_STRUCT(b, "bin_attribute", 0x28, { "attr", t_attr, 0 });
	t_sattr = ADD_STRUCT(b, "module_sect_attr", 0x30,
			     { "battr", t_battr, 0 },
			     { "address", t_ulong, 0x28 });
	ADD_STRUCT(b, "module_sect_attrs", 0x10, { "nsections", t_uint, 0x8 },
		   { "attrs", btf__add_array(b, t_int, t_sattr, 0), 0x10 });
}

static void build_btf(void)
{
	struct btf *b = btf__new_empty();
	int t_int, t_uint, t_ulong, t_char, t_ptr, t_list, t_ti, t_th, t_comm, t_se;
	int t_si;
	const void *raw;
	uint32_t size;
	int i;

	t_int = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	t_uint = btf__add_int(b, "unsigned int", 4, 0);
	t_ulong = btf__add_int(b, "long unsigned int", 8, 0);
	t_char = btf__add_int(b, "char", 1, BTF_INT_CHAR);
	t_ptr = btf__add_ptr(b, 0);
	t_list = ADD_STRUCT(b, "list_head", 16, { "next", t_ptr, 0 },
			    { "prev", t_ptr, 8 });
	t_ti = ADD_STRUCT(b, "thread_info", 24, { "cpu", t_uint, 20 });
	t_th = ADD_STRUCT(b, "thread_struct", 16, { "sp", t_ulong, 0 },
			  { "fsbase", t_ulong, 8 });
	t_comm = btf__add_array(b, t_int, t_char, 16);
	t_se = ADD_STRUCT(b, "sched_entity", 16, { "nr_migrations", t_ulong, 0 },
			  { "exec_start", t_ulong, 8 });
	t_si = ADD_STRUCT(b, "sched_info", 24, { "pcount", t_ulong, 0 },
			  { "last_arrival", t_ulong, 16 });
	ADD_STRUCT(b, "task_struct", 0x300, { "thread_info", t_ti, 0 },
		   { "__state", t_uint, 24 }, { "stack", t_ptr, 32 },
		   { "on_cpu", t_int, 40 }, { "flags", t_uint, 44 },
		   { "tasks", t_list, 0x80 }, { "mm", t_ptr, 0x90 },
		   { "pid", t_int, 0xa0 }, { "tgid", t_int, 0xa4 },
		   { "thread_node", t_list, 0xb0 }, { "nvcsw", t_ulong, 0xd0 },
		   { "nivcsw", t_ulong, 0xd8 }, { "comm", t_comm, 0xe0 },
		   { "signal", t_ptr, 0xf0 }, { "se", t_se, 0x100 },
		   { "sched_info", t_si, 0x110 }, { "thread", t_th, 0x200 });
	/* Run queues that count switch-ins: last_ran's hot reads. */
	ADD_STRUCT(b, "rq", 0x100, { "nr_switches", t_ulong, 0x48 },
		   { "rq_sched_info", t_si, 0x80 }, { "clock", t_ulong, 0xc0 });
	ADD_STRUCT(b, "signal_struct", 0x40, { "thread_head", t_list, 0x10 });
	ADD_STRUCT(b, "mm_struct", 0x80, { "pgd", t_ptr, 0x48 });
	btf__add_struct(b, "pt_regs", 21 * 8);
	{
		static const char *const r[] = {
			"r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10",
			"r9", "r8", "ax", "cx", "dx", "si", "di", "orig_ax",
			"ip", "cs", "flags", "sp", "ss",
		};

		for (i = 0; i < 21; i++)
			btf__add_field(b, r[i], t_ulong, (uint32_t)i * 64, 0);
	}
	build_module_btf(b, t_int, t_uint, t_ulong, t_char, t_ptr, t_list);
	raw = btf__raw_data(b, &size);
	if (ivm_btf_load_blob(raw, size, &btf) ||
	    ivm_kernel_offsets_from_btf(btf, &off))
		abort();
	btf__free(b);
}

static void ring(uint64_t head, const uint64_t *nodes, size_t n)
{
	uint64_t prev = head;
	size_t i;

	for (i = 0; i < n; i++) {
		w64(prev, nodes[i]);
		w64(nodes[i] + 8, prev);
		prev = nodes[i];
	}
	w64(prev, head);
	w64(head + 8, prev);
}

static void task(uint64_t t, int pid, int tgid, const char *comm,
		 uint64_t signal)
{
	w32(t + off.task_pid, (uint32_t)pid);
	w32(t + off.task_tgid, (uint32_t)tgid);
	memcpy(at(t + off.task_comm), comm, strlen(comm));
	w64(t + off.task_signal, signal);
}

/*
 * Two modules on the kernel's list: "virtio_blk" with three sections, one
 * of them its build-id note, and "dm_mod" with no sysfs sections.
 */
static void build_modules(void)
{
	static const char *const sect[3] = { ".text", ".data",
					     ".note.gnu.build-id" };
	static const uint8_t note[] = {
		4, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, 'G', 'N', 'U', 0,
		0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
		13, 14, 15, 16,
	};
	const uint64_t list[2] = { DM(A_MOD(0)) + 8, DM(A_MOD(1)) + 8 };
	int i;

	for (i = 0; i < 2; i++) {
		uint64_t m = DM(A_MOD(i));

		memcpy(at(m + 0x18), i ? "dm_mod" : "virtio_blk",
		       i ? 6 : 10);
		w64(m + 0x70, KVA(0x40000 + i * 0x10000));
		w32(m + 0x78, 0x8000);
		w32(m + 0x90, 16);
		w64(m + 0x98, KVA(0x60000));
		w64(m + 0xa0, KVA(0x61000));
	}
	w64(DM(A_MOD(0)) + 0x60, DM(A_SECT(0)));
	w32(DM(A_SECT(0)) + 0x8, 3);
	for (i = 0; i < 3; i++) {
		uint64_t a = DM(A_SECT(0)) + 0x10 + (uint64_t)i * 0x30;

		memcpy(at(DM(A_STR(i))), sect[i], strlen(sect[i]));
		w64(a, DM(A_STR(i)));
		w64(a + 0x28, i == 2 ? DM(A_NOTE) : KVA(0x40000 + i * 0x1000));
	}
	memcpy(at(DM(A_NOTE)), note, sizeof(note));
	ring(KVA(K_VARS) + 0x40, list, 2);
}

static void build_guest(void)
{
	static const char map[] =
		"0000000000000100 D current_task\n"
		"0000000000000200 d idle_threads\n"
		"0000000000000400 D runqueues\n"
		"ffffffff81200000 D linux_banner\n"
		"ffffffff81201000 D init_task\n"
		"ffffffff81300000 D init_top_pgt\n"
		"ffffffff81301000 D __per_cpu_offset\n"
		"ffffffff81301010 D nr_cpu_ids\n"
		"ffffffff81301018 D page_offset_base\n"
		"ffffffff81301020 D phys_base\n"
		"ffffffff81301028 D max_pfn\n"
		"ffffffff81301030 D total_forks\n"
		"ffffffff81301040 D modules\n";
	uint64_t init = KVA(K_INIT_TASK), t[5], tn = off.task_thread_node;
	uint64_t th = off.signal_thread_head, tt = off.task_tasks;
	uint8_t *pgt = at(KVA(K_PGT));
	int i;

	if (ivm_ksyms_parse_system_map(map, sizeof(map) - 1, &ksyms))
		abort();
	pte(pgt, idx(KVA(0), 4), A_PDPT_K | 3);
	pte(pgt, idx(POB, 4), A_PDPT_D | 3);
	pte(base_a + A_PDPT_K, idx(KVA(0), 3), A_PD_K | 3);
	pte(base_a + A_PD_K, idx(KVA(0), 2), B_GPA | 0x83);
	pte(base_a + A_PDPT_D, idx(POB, 3), 0x83);
	memcpy(at(KVA(K_BANNER)), BANNER, sizeof(BANNER));
	w64(KVA(K_VARS), DM(A_PCPU(0)));
	w64(KVA(K_VARS) + 8, DM(A_PCPU(1)));
	w32(KVA(K_VARS) + 0x10, 2);
	w64(KVA(K_VARS) + 0x18, POB);
	w64(KVA(K_VARS) + 0x28, 0x4000);
	for (i = 0; i < 5; i++)
		t[i] = DM(A_TASK(i));
	task(init, 0, 0, "swapper/0", DM(A_SIGNAL(0)));
	task(t[0], 1, 1, "init", DM(A_SIGNAL(1)));
	task(t[1], 50, 50, "p", DM(A_SIGNAL(2)));
	task(t[2], 51, 50, "p-t", DM(A_SIGNAL(2)));
	task(t[3], 52, 50, "p-t", DM(A_SIGNAL(2)));
	task(t[4], 0, 0, "swapper/1", DM(A_SIGNAL(0)));
	w64(DM(A_PCPU(0)) + 0x100, t[2]);
	w64(DM(A_PCPU(1)) + 0x100, t[4]);
	w64(DM(A_PCPU(0)) + 0x200, init);
	w64(DM(A_PCPU(1)) + 0x200, t[4]);
	{
		const uint64_t procs[] = { t[0] + tt, t[1] + tt };
		const uint64_t s0[] = { init + tn };
		const uint64_t s1[] = { t[0] + tn };
		const uint64_t s2[] = { t[1] + tn, t[2] + tn, t[3] + tn };

		ring(init + tt, procs, 2);
		ring(DM(A_SIGNAL(0)) + th, s0, 1);
		ring(DM(A_SIGNAL(1)) + th, s1, 1);
		ring(DM(A_SIGNAL(2)) + th, s2, 3);
	}
	build_modules();
}

/*
 * Slots the fuzzer may overwrite: the data area, the modules after it,
 * and the kernel variables (the module list's head the last two).
 */
#define DATA_SLOTS ((A_MODS_END - A_DATA) / 8)
#define VAR_SLOTS 10
#define NR_SLOTS (DATA_SLOTS + VAR_SLOTS + 1)

static uint8_t *slot(unsigned int s)
{
	s %= NR_SLOTS;
	if (s < DATA_SLOTS)
		return mem_a + A_DATA + s * 8;
	if (s < DATA_SLOTS + VAR_SLOTS)
		return mem_b + (K_VARS + (s - DATA_SLOTS) * 8);
	return mem_b + K_INIT_TASK + off.task_tasks;
}

/* Whether task is a non-idle task of list (NULL: none). */
static bool in_walk(const struct ivm_guest_task_list *list, uint64_t task)
{
	size_t i;

	for (i = 0; list && i < list->nr; i++)
		if (list->tasks[i].addr == task && !list->tasks[i].is_idle)
			return true;
	return false;
}

/*
 * The task last_ran named, if it did: a non-idle task of the walk or of
 * the walk after memory changed (after; NULL: none), or abort.
 */
static void named_of_walk(const struct ivm_guest_task_list *list,
			  const struct ivm_guest_task_list *after,
			  struct ivm_error *err, const uint64_t *task)
{
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	if (!in_walk(list, *task) && !in_walk(after, *task))
		abort();
}

/* Overwrite slots of guest memory with the input's 10-byte records. */
static void overwrite(const uint8_t *data, size_t size)
{
	size_t i;

	for (i = 0; i + 10 <= size && i < 10 * 64; i += 10) {
		uint16_t s;

		memcpy(&s, data + i, 2);
		memcpy(slot(s), data + i + 2, 8);
	}
}

/* Every lookup of last_ran on CPUs 0..3 at now_ns, checked against list. */
static void last_ran_ask(struct ivm_last_ran *lr,
			 const struct ivm_guest_task_list *list,
			 const struct ivm_guest_task_list *after,
			 uint64_t now_ns)
{
	struct ivm_last_ran_run runs[8];
	struct ivm_error *err;
	uint64_t task, arrival;
	unsigned int cpu;
	size_t i, nr;

	for (cpu = 0; cpu < 4; cpu++) {
		err = ivm_last_ran_find_at(lr, cpu, 0, 0x1000, 0x800,
					   now_ns + cpu, &task);
		named_of_walk(list, after, err, &task);
		err = ivm_last_ran_first_since(lr, cpu, 0, 0x100, now_ns + cpu,
					       &task, &arrival);
		named_of_walk(list, after, err, &task);
		err = ivm_last_ran_window(lr, cpu, 0, 0x100,
					  IVM_LAST_RAN_UNKNOWN, now_ns + cpu,
					  runs, 8, &nr);
		if (nr > 8)
			abort();
		for (i = 0; !err && i < nr; i++)
			named_of_walk(list, after, NULL, &runs[i].task);
		ivm_error_destroy(err);
	}
}

/*
 * The walk hinted by the tasks of the walk before (as last_ran's) must
 * give the plain walk's list, on any memory: the batch only saves reads.
 */
static void hinted_walk_check(const struct ivm_kernel_layout *layout,
			      const struct ivm_guest_task_list *before,
			      const struct ivm_guest_task_list *plain)
{
	struct ivm_guest_task_list *hinted;
	uint64_t *hint;
	size_t i;

	if (!plain)
		return;
	hint = malloc((before->nr + 1) * sizeof(*hint));
	if (!hint)
		return;
	for (i = 0; i < before->nr; i++)
		hint[i] = before->tasks[i].addr;
	if (ivm_kernel_task_list_hinted(layout, 0, hint, before->nr,
					&hinted)) {
		free(hint);
		return;
	}
	if (hinted->nr != plain->nr || hinted->truncated != plain->truncated)
		abort();
	for (i = 0; i < plain->nr; i++)
		if (hinted->tasks[i].addr != plain->tasks[i].addr ||
		    hinted->tasks[i].pid != plain->tasks[i].pid ||
		    hinted->tasks[i].tgid != plain->tasks[i].tgid ||
		    strcmp(hinted->tasks[i].comm, plain->tasks[i].comm))
			abort();
	ivm_guest_task_list_destroy(hinted);
	free(hint);
}

/*
 * Whatever cpu, on_cpu, exec_start, nr_migrations, the switch-in counts,
 * the run queues' counts and clocks and the count of forks say, who ran
 * last is a non-idle task of the walk, or nobody.  The CPU numbers asked
 * include ones no task claims.  The first lookup reads all tasks, the
 * next ones the hot ones (all, at first), and a second later, after a
 * walk, none of them.  Then the input's second part changes memory (forks
 * counted, tasks moved): the answers are of one walk or the other.
 */
static void last_ran_check(const struct ivm_kernel_layout *layout,
			   struct ivm_gmem *gmem, const uint8_t *more,
			   size_t more_size)
{
	const uint64_t later = 2000000000ull;
	struct ivm_guest_task_list *list, *after = NULL;
	struct ivm_last_ran *lr;
	struct ivm_error *err;
	uint64_t task;
	unsigned int cpu;

	/* The same cap as last_ran's own walk. */
	if (ivm_kernel_task_list(layout, 0, &list))
		return;
	if (ivm_last_ran_create(layout, gmem, &lr))
		abort();	/* the BTF has se.exec_start */
	for (cpu = 0; cpu < 4; cpu++) {
		err = ivm_last_ran_find(lr, cpu, cpu == 3 ? 50 : 0, 0, &task);
		named_of_walk(list, after, err, &task);
	}
	last_ran_ask(lr, list, NULL, later);
	if (more_size) {
		overwrite(more, more_size);
		if (ivm_kernel_task_list(layout, 0, &after))
			after = NULL;
		hinted_walk_check(layout, list, after);
		/* The same walk, then one of its own (stale, or due). */
		last_ran_ask(lr, list, after, later + 1);
		last_ran_ask(lr, list, after, later + 100000000ull);
		last_ran_ask(lr, list, after, 2 * later);
	}
	ivm_last_ran_destroy(lr);
	ivm_guest_task_list_destroy(after);
	ivm_guest_task_list_destroy(list);
}

/*
 * Whatever the list holds, the walk's modules are written into a profile
 * as lines its reader takes back unchanged (the report symbolizes module
 * code from them), and a walk cut short says why.
 */
static void modules_check(const struct ivm_kernel_layout *layout,
			  bool patched)
{
	struct ivm_kmodules *mods;
	struct ivm_kmodule back;
	size_t i, k, nr;
	char *line, **secs;

	if (ivm_kmodules_read(layout, btf, &mods))
		abort();	/* the BTF has struct module, the map modules */
	if (mods->nr > IVM_KMODULES_MAX || mods->truncated != !!mods->error)
		abort();
	/* The guest as built: the harness itself is sound. */
	if (!patched && (mods->nr != 2 || mods->truncated ||
			 mods->mods[0].nr_sections != 3 ||
			 strcmp(mods->mods[0].build_id,
				"deadbeef0102030405060708090a0b0c0d0e0f10") ||
			 mods->mods[1].nr_sections || !mods->mods[1].num_orcs))
		abort();
	for (i = 0; i < mods->nr; i++) {
		const struct ivm_kmodule *m = &mods->mods[i];
		size_t kept = 0;

		line = ivm_kmodule_format(m);
		if (!line)
			abort();
		if (ivm_kmodule_parse(line, &back) ||
		    strcmp(back.name, m->name) || back.base != m->base ||
		    back.size != m->size || strcmp(back.build_id, m->build_id))
			abort();
		free(line);
		secs = ivm_kmodule_format_sections(m, &nr);
		if (!secs)
			abort();
		for (k = 0; k < nr; k++) {
			if (ivm_kmodule_parse_sections(secs[k], &back, 1))
				abort();
			free(secs[k]);
		}
		free(secs);
		/* The sections left out are those no line can carry. */
		for (k = 0; k < m->nr_sections; k++)
			if (kept < back.nr_sections &&
			    !strcmp(back.sections[kept].name,
				    m->sections[k].name) &&
			    back.sections[kept].addr == m->sections[k].addr)
				kept++;
		if (kept != back.nr_sections)
			abort();
		ivm_kmodule_release(&back);
	}
	ivm_kmodules_destroy(mods);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_kernel_layout_config config = { 0 };
	struct ivm_gmem_region regions[2];
	struct ivm_x86_regs regs[2] = { 0 };
	struct ivm_guest_task_list *list;
	struct ivm_kernel_layout *layout;
	struct ivm_gmem *gmem;
	struct ivm_guest_task task_mem;
	struct ivm_error *err;
	unsigned int cpu;
	size_t i;

	if (!btf) {
		libbpf_set_print(quiet);
		build_btf();
		build_guest();
		mem_a = malloc(A_SIZE);
		mem_b = malloc(B_SIZE);
		if (!mem_a || !mem_b)
			abort();
	}
	memcpy(mem_a, base_a, A_SIZE);
	memcpy(mem_b, base_b, B_SIZE);
	overwrite(data, size);
	regions[0] = (struct ivm_gmem_region){ 0, A_SIZE,
					       (uint64_t)(uintptr_t)mem_a };
	regions[1] = (struct ivm_gmem_region){ B_GPA, B_SIZE,
					       (uint64_t)(uintptr_t)mem_b };
	if (ivm_gmem_buffer_create(regions, 2, &gmem))
		abort();
	for (i = 0; i < 2; i++) {
		regs[i].valid = IVM_X86_REGS_SEGMENTS | IVM_X86_REGS_CRS |
				IVM_X86_REGS_FS_GS_BASE;
		regs[i].cr3 = B_GPA + K_PGT;
		regs[i].gs_base = DM(A_PCPU(i));
	}
	config.btf = btf;
	config.ksyms = ksyms;
	config.vcpu_regs = regs;
	config.nr_vcpus = 2;
	err = ivm_kernel_layout_create(gmem, &config, &layout);
	if (err) {
		ivm_error_destroy(err);
		ivm_gmem_destroy(gmem);
		return 0;
	}
	for (cpu = 0; cpu < ivm_kernel_layout_nr_cpus(layout); cpu++) {
		uint64_t cur;

		err = ivm_kernel_current_task(layout, cpu, &regs[cpu % 2], &cur);
		if (!err)
			err = ivm_kernel_read_task(layout, cur, &task_mem);
		ivm_error_destroy(err);
	}
	/* Past the first 64 records: memory as it changes between looks. */
	last_ran_check(layout, gmem, size > 640 ? data + 640 : NULL,
		       size > 640 ? size - 640 : 0);
	err = ivm_kernel_task_list(layout, 64, &list);
	if (!err) {
		for (i = 0; i < list->nr; i++) {
			uint64_t cr3;

			/* comm must always come back NUL-terminated. */
			if (strnlen(list->tasks[i].comm,
				    sizeof(list->tasks[i].comm)) ==
			    sizeof(list->tasks[i].comm))
				abort();
			ivm_error_destroy(ivm_kernel_task_user_cr3(
				layout, &list->tasks[i], &cr3));
		}
		ivm_guest_task_list_destroy(list);
	}
	ivm_error_destroy(err);
	modules_check(layout, size >= 10);
	ivm_kernel_layout_destroy(layout);
	ivm_gmem_destroy(gmem);
	return 0;
}
