// SPDX-License-Identifier: MIT
/*
 * kernel_layout over the synthetic guest (synth_guest.h): finding the
 * kernel, `current`, the task list and the run queues' counts, then broken
 * in the ways a hostile or half-updated guest breaks them.
 */
#include "synth_guest.h"

Test(kernel_layout, finds_slide_past_decoy_and_per_cpu)
{
	struct fixture f;
	struct ivm_kernel_layout *l;
	uint64_t addr;

	fixture_init(&f);
	l = create_ok(&f);
	cr_expect_eq(ivm_kernel_layout_slide(l), SLIDE);
	cr_expect_eq(ivm_kernel_layout_phys_base(l), 0);
	/* The kernel's own page table, not the vCPU's copy. */
	cr_expect_eq(ivm_kernel_layout_cr3(l), B_GPA + 0x100000);
	cr_expect_not(ivm_kernel_layout_la57(l));
	cr_expect_eq(ivm_kernel_layout_page_offset_base(l), POB);
	cr_expect_eq(ivm_kernel_layout_nr_cpus(l), 2);
	cr_expect_eq(ivm_kernel_layout_per_cpu_offset(l, 1), DM(PA_PCPU1));
	cr_expect_eq(ivm_kernel_layout_per_cpu_offset(l, 2), 0);
	cr_expect_eq(ivm_kernel_layout_init_task(l), KVA(L_INIT_TASK));
	cr_expect_eq(ivm_kernel_layout_idle_task(l, 0), KVA(L_INIT_TASK));
	cr_expect_eq(ivm_kernel_layout_idle_task(l, 1), task_va(IDLE1));
	/* vCPU 1 is in user mode: found through its kernel GS base. */
	cr_expect_eq(ivm_kernel_layout_vcpu_cpu(l, 0), 0);
	cr_expect_eq(ivm_kernel_layout_vcpu_cpu(l, 1), 1);
	cr_expect_eq(ivm_kernel_layout_vcpu_cpu(l, 2), -1);
	/* Image symbols slide, zero-based per-CPU ones do not. */
	cr_assert_null(ivm_kernel_symbol(l, "max_pfn", &addr));
	cr_expect_eq(addr, KVA(L_MAX_PFN));
	cr_assert_null(ivm_kernel_symbol(l, "current_task", &addr));
	cr_expect_eq(addr, PCPU_CURRENT_TASK);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(kernel_layout, slide_hint_and_exact_banner)
{
	struct fixture f;
	struct ivm_kernel_layout *l;
	struct ivm_error *err;

	fixture_init(&f);
	f.config.has_slide_hint = true;
	f.config.slide_hint = SLIDE;
	f.config.banner = BANNER;
	l = create_ok(&f);
	cr_expect_eq(ivm_kernel_layout_slide(l), SLIDE);
	ivm_kernel_layout_destroy(l);
	/* A hint the banner contradicts is an error, not a silent pick. */
	f.config.slide_hint = SLIDE + (4u << 20);
	err = create_err(&f);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	cr_expect(strstr(ivm_error_string(err), "hint"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
	/* A different exact banner (another build) is not found. */
	f.config.has_slide_hint = false;
	f.config.banner = "Linux version 6.1.0-other\n";
	err = create_err(&f);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	fixture_fini(&f);
}

Test(kernel_layout, no_banner_anywhere)
{
	struct fixture f;
	struct ivm_error *err;

	fixture_init(&f);
	memset(at(&f, KVA(L_BANNER)), 0, sizeof(BANNER));
	err = create_err(&f);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	/* The decoy was seen and rejected by its init_task. */
	cr_expect(strstr(ivm_error_string(err), "1 banner(s)"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
	fixture_fini(&f);
}

Test(kernel_layout, no_usable_registers)
{
	struct fixture f;
	struct ivm_error *err;

	fixture_init(&f);
	f.regs[0].valid = f.regs[1].valid = IVM_X86_REGS_GPRS;
	err = create_err(&f);
	cr_expect_eq(err->code, IVM_ERROR_INVALID);
	cr_expect(strstr(ivm_error_string(err), "CR3"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
	fixture_fini(&f);
}

Test(kernel_layout, kpti_user_cr3_falls_back_to_kernel_copy)
{
	struct fixture f;
	struct ivm_kernel_layout *l;

	fixture_init(&f);
	/*
	 * Both vCPUs in user mode under KPTI: CR3 points at the user copy
	 * (bit 12 set), which maps no kernel data.
	 */
	memset(f.a + PA_VCPU_PML4 + 0x1000, 0, 4096);
	f.regs[0].cr3 = f.regs[1].cr3 = PA_VCPU_PML4 | (1u << 12);
	l = create_ok(&f);
	cr_expect_eq(ivm_kernel_layout_slide(l), SLIDE);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(kernel_layout, current_task_per_cpu)
{
	struct fixture f;
	struct ivm_kernel_layout *l;
	struct ivm_guest_task t;
	struct ivm_error *err;
	uint64_t task;
	unsigned int cpu;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_current_task(l, 0, &f.regs[0], &task));
	cr_expect_eq(task, task_va(T51));
	cr_assert_null(ivm_kernel_current_task(l, 1, NULL, &task));
	cr_expect_eq(task, task_va(IDLE1));
	cr_assert_null(ivm_kernel_read_task(l, task, &t));
	cr_expect(t.is_idle);
	cr_expect_str_eq(t.comm, "swapper/1");
	/* The cached physical slot follows the guest's updates. */
	w64(&f, DM(PA_PCPU1) + PCPU_CURRENT_TASK, task_va(T52));
	cr_assert_null(ivm_kernel_current_task(l, 1, &f.regs[1], &task));
	cr_expect_eq(task, task_va(T52));
	/* Registers of the other CPU: the caller's map is stale. */
	err = ivm_kernel_current_task(l, 0, &f.regs[1], &task);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	err = ivm_kernel_current_task(l, 2, NULL, &task);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	/* A garbage current pointer is refused. */
	w64(&f, DM(PA_PCPU0) + PCPU_CURRENT_TASK, 0x1234);
	err = ivm_kernel_current_task(l, 0, NULL, &task);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	/* APIC ids, for vCPUs whose registers name no per-CPU area. */
	cr_assert_null(ivm_kernel_cpu_from_apic_id(l, 2, &cpu));
	cr_expect_eq(cpu, 1);
	cr_assert_null(ivm_kernel_cpu_from_apic_id(l, 0, &cpu));
	cr_expect_eq(cpu, 0);
	err = ivm_kernel_cpu_from_apic_id(l, 1, &cpu);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	/* Kernel entry before swapgs: GS is still the user's. */
	f.regs[1].cs = 0x10;
	cr_assert_null(ivm_kernel_cpu_from_regs(l, &f.regs[1], &cpu));
	cr_expect_eq(cpu, 1);
	f.regs[1].kernel_gs_base = 0;
	err = ivm_kernel_cpu_from_regs(l, &f.regs[1], &cpu);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(kernel_layout, task_list_complete)
{
	static const struct {
		int pid, tgid;
		const char *comm;
	} want[] = {
		{ 0, 0, "swapper/0" }, { 1, 1, "init" },
		{ 50, 50, "sleeper" }, { 51, 50, "sleeper-t1" },
		{ 52, 50, "sleeper-t2" }, { 0, 0, "swapper/1" },
	};
	struct ivm_guest_task_list *list;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t cr3;
	size_t i;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_task_list(l, 0, &list));
	cr_expect_not(list->truncated, "%s",
		      list->error ? ivm_error_string(list->error) : "");
	cr_assert_eq(list->nr, 6, "%zu tasks", list->nr);
	for (i = 0; i < 6; i++) {
		cr_expect_eq(list->tasks[i].pid, want[i].pid, "task %zu", i);
		cr_expect_eq(list->tasks[i].tgid, want[i].tgid, "task %zu", i);
		cr_expect_str_eq(list->tasks[i].comm, want[i].comm);
		cr_expect_eq(list->tasks[i].nvcsw, (uint64_t)want[i].pid * 10);
		cr_expect_eq(list->tasks[i].nivcsw,
			     (uint64_t)want[i].pid * 10 + 1);
		cr_expect_eq(list->tasks[i].thread_sp,
			     list->tasks[i].addr + 0x5000);
		cr_expect_eq(list->tasks[i].is_idle, want[i].pid == 0);
	}
	cr_expect_eq(list->tasks[4].cpu, 1);
	cr_expect(list->tasks[0].flags & IVM_GUEST_PF_KTHREAD);
	cr_assert_null(ivm_kernel_task_user_cr3(l, &list->tasks[1], &cr3));
	cr_expect_eq(cr3, PA_USER_PGD);
	{
		struct ivm_error *err;

		err = ivm_kernel_task_user_cr3(l, &list->tasks[0], &cr3);
		cr_assert_not_null(err);
		cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
		ivm_error_destroy(err);
	}
	ivm_guest_task_list_destroy(list);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * A task read with the pgd of the mm the caller guesses it has (one batch
 * of guest reads, one system call on a live guest), and no pgd when the
 * guess is wrong or unreadable, the task read all the same.
 */
Test(kernel_layout, task_read_with_its_pgd)
{
	const uint64_t guesses[] = { 0, DM(PA_MM) + 0x800, POB + A_SIZE };
	struct ivm_kernel_layout *l;
	struct ivm_guest_task t;
	struct fixture f;
	uint64_t pgd, cr3;
	size_t i;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_read_task_pgd(l, task_va(P1), DM(PA_MM), &t,
						&pgd));
	cr_expect_eq(t.pid, 1);
	cr_expect_str_eq(t.comm, "init");
	cr_expect_eq(pgd, DM(PA_USER_PGD));
	cr_assert_null(ivm_kernel_user_cr3_of_pgd(l, &t, pgd, &cr3));
	cr_expect_eq(cr3, PA_USER_PGD);
	{
		/* A guest's pgd word is checked as a pointer read alone is. */
		struct ivm_error *err = ivm_kernel_user_cr3_of_pgd(l, &t,
								   0x1000,
								   &cr3);

		cr_assert_not_null(err);
		cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
		ivm_error_destroy(err);
	}
	for (i = 0; i < sizeof(guesses) / sizeof(guesses[0]); i++) {
		pgd = 1;
		cr_assert_null(ivm_kernel_read_task_pgd(l, task_va(P1),
							guesses[i], &t, &pgd),
			       "guess %zu", i);
		cr_expect_eq(t.pid, 1, "guess %zu", i);
		cr_expect_eq(pgd, 0, "guess %zu", i);
	}
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * A process of 600 threads: the walk's room, which starts small, grows
 * past it with every task read whole, and a cap still cuts the list.
 */
#define PA_MANY(i) (0x220000ull + (i) * 0x400ull)	/* task_struct 0x300 */
#define NR_MANY 600

Test(kernel_layout, task_list_grows)
{
	uint64_t ring[NR_MANY + 3];
	struct ivm_guest_task_list *list;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t tn;
	size_t i;

	fixture_init(&f);
	tn = f.off.task_thread_node;
	ring[0] = task_va(P2) + tn;
	ring[1] = task_va(T51) + tn;
	ring[2] = task_va(T52) + tn;
	for (i = 0; i < NR_MANY; i++) {
		char comm[16];

		snprintf(comm, sizeof(comm), "many-%zu", i);
		set_task(&f, DM(PA_MANY(i)), 1000 + (int)i, 50, comm,
			 DM(PA_SIGNAL(2)), DM(PA_MM), (uint32_t)(i & 1));
		ring[3 + i] = DM(PA_MANY(i)) + tn;
	}
	link_ring(&f, DM(PA_SIGNAL(2)) + f.off.signal_thread_head, ring,
		  NR_MANY + 3);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_task_list(l, 0, &list));
	cr_expect_not(list->truncated, "%s",
		      list->error ? ivm_error_string(list->error) : "");
	cr_assert_eq(list->nr, 6 + NR_MANY, "%zu tasks", list->nr);
	for (i = 0; i < NR_MANY; i++) {
		const struct ivm_guest_task *t = &list->tasks[5 + i];

		cr_assert_eq(t->pid, 1000 + (int)i, "task %zu", i);
		cr_expect_eq(t->nvcsw, (uint64_t)t->pid * 10);
		cr_expect_eq(t->addr, DM(PA_MANY(i)));
	}
	cr_expect_str_eq(list->tasks[5 + NR_MANY].comm, "swapper/1");
	ivm_guest_task_list_destroy(list);
	/* A cap past the first room, short of the tasks: cut there. */
	cr_assert_null(ivm_kernel_task_list(l, 300, &list));
	cr_expect(list->truncated);
	cr_expect_eq(list->nr, 300);
	cr_expect(strstr(ivm_error_string(list->error), "more than 300"));
	ivm_guest_task_list_destroy(list);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(kernel_layout, thread_group_kernels)
{
	struct ivm_guest_task_list *list;
	struct ivm_kernel_layout *l;
	struct fixture f;

	fixture_init_with(&f, true);
	cr_expect_eq(f.off.task_thread_node, IVM_KOFF_NONE);
	cr_expect_eq(f.off.signal_thread_head, IVM_KOFF_NONE);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_task_list(l, 0, &list));
	cr_expect_not(list->truncated, "%s",
		      list->error ? ivm_error_string(list->error) : "");
	cr_assert_eq(list->nr, 6, "%zu tasks", list->nr);
	cr_expect_eq(list->tasks[3].pid, 51);
	cr_expect_eq(list->tasks[4].pid, 52);
	ivm_guest_task_list_destroy(list);
	/* A thread ring that never returns to its leader. */
	w64(&f, task_va(T52) + f.off.task_thread_group,
	    task_va(T51) + f.off.task_thread_group);
	cr_assert_null(ivm_kernel_task_list(l, 0, &list));
	cr_expect(list->truncated);
	cr_expect(strstr(ivm_error_string(list->error), "loops"));
	ivm_guest_task_list_destroy(list);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(kernel_layout, current_in_pcpu_hot)
{
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t task;

	g_pcpu_hot = true;
	fixture_init(&f);
	cr_expect_eq(f.off.pcpu_hot_current_task, PCPU_HOT_CURRENT);
	w64(&f, DM(PA_PCPU0) + PCPU_HOT + PCPU_HOT_CURRENT, task_va(P2));
	w64(&f, DM(PA_PCPU1) + PCPU_HOT + PCPU_HOT_CURRENT, task_va(T52));
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_current_task(l, 0, NULL, &task));
	cr_expect_eq(task, task_va(P2));
	cr_assert_null(ivm_kernel_current_task(l, 1, NULL, &task));
	cr_expect_eq(task, task_va(T52));
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/* Optional symbols missing: defaults, page walks, no idle tasks but CPU 0's. */
Test(kernel_layout, minimal_symbols)
{
	struct ivm_guest_task_list *list;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t task;
	unsigned int cpu;
	struct ivm_error *err;

	g_minimal_symbols = true;
	fixture_init(&f);
	l = create_ok(&f);
	cr_expect_eq(ivm_kernel_layout_slide(l), SLIDE);
	/* phys_base from where the banner really is. */
	cr_expect_eq(ivm_kernel_layout_phys_base(l), 0);
	/* Without init_top_pgt: the vCPU's page table. */
	cr_expect_eq(ivm_kernel_layout_cr3(l), PA_VCPU_PML4);
	cr_expect_eq(ivm_kernel_layout_page_offset_base(l),
		     0xffff888000000000ull);
	cr_assert_null(ivm_kernel_current_task(l, 0, NULL, &task));
	cr_expect_eq(task, task_va(T51));
	cr_expect_eq(ivm_kernel_layout_idle_task(l, 0), KVA(L_INIT_TASK));
	cr_expect_eq(ivm_kernel_layout_idle_task(l, 1), 0);
	err = ivm_kernel_cpu_from_apic_id(l, 0, &cpu);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	cr_assert_null(ivm_kernel_task_list(l, 0, &list));
	cr_expect_not(list->truncated);
	cr_expect_eq(list->nr, 5);
	ivm_guest_task_list_destroy(list);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

static struct ivm_guest_task_list *walk(struct fixture *f, size_t max)
{
	struct ivm_guest_task_list *list;
	struct ivm_kernel_layout *l = create_ok(f);

	cr_assert_null(ivm_kernel_task_list(l, max, &list));
	ivm_kernel_layout_destroy(l);
	return list;
}

Test(kernel_layout, thread_list_cycle_truncates)
{
	struct fixture f;
	struct ivm_guest_task_list *list;
	uint64_t tn;

	fixture_init(&f);
	tn = f.off.task_thread_node;
	/* T52 points back at T51 instead of the head: a ring without end. */
	w64(&f, task_va(T52) + tn, task_va(T51) + tn);
	list = walk(&f, 0);
	cr_expect(list->truncated);
	cr_assert_not_null(list->error);
	cr_expect(strstr(ivm_error_string(list->error), "loops"), "%s",
		  ivm_error_string(list->error));
	/*
	 * What was read before the cycle is kept (init, P1, P2, T51, T52),
	 * and the idle task of CPU 1, found apart from the lists.
	 */
	cr_expect_eq(list->nr, 6);
	cr_expect_str_eq(list->tasks[5].comm, "swapper/1");
	ivm_guest_task_list_destroy(list);
	fixture_fini(&f);
}

Test(kernel_layout, leader_self_loop_truncates)
{
	struct fixture f;
	struct ivm_guest_task_list *list;
	uint64_t tn;

	fixture_init(&f);
	tn = f.off.task_thread_node;
	w64(&f, task_va(P1) + tn, task_va(P1) + tn);
	list = walk(&f, 0);
	cr_expect(list->truncated);
	cr_expect(strstr(ivm_error_string(list->error), "loops"), "%s",
		  ivm_error_string(list->error));
	ivm_guest_task_list_destroy(list);
	fixture_fini(&f);
}

Test(kernel_layout, process_list_cycle_truncates)
{
	struct fixture f;
	struct ivm_guest_task_list *list;
	uint64_t tt;

	fixture_init(&f);
	tt = f.off.task_tasks;
	w64(&f, task_va(P2) + tt, task_va(P1) + tt);
	list = walk(&f, 0);
	cr_expect(list->truncated);
	cr_expect(strstr(ivm_error_string(list->error), "loops"), "%s",
		  ivm_error_string(list->error));
	cr_expect_eq(list->nr, 6);
	ivm_guest_task_list_destroy(list);
	fixture_fini(&f);
}

Test(kernel_layout, bad_pointer_mid_walk_truncates)
{
	struct fixture f;
	struct ivm_guest_task_list *list;

	fixture_init(&f);
	/* P1's next process lies in unmapped vmalloc space. */
	w64(&f, task_va(P1) + f.off.task_tasks, 0xffffc90000001000ull);
	list = walk(&f, 0);
	cr_expect(list->truncated);
	cr_assert_not_null(list->error);
	cr_expect_eq(list->error->code, IVM_ERROR_FAULT, "%s",
		     ivm_error_string(list->error));
	/* init_task and P1 were read, and CPU 1's idle task. */
	cr_expect_eq(list->nr, 3);
	cr_expect_eq(list->tasks[1].pid, 1);
	cr_expect_str_eq(list->tasks[2].comm, "swapper/1");
	ivm_guest_task_list_destroy(list);

	/* A user-space pointer is refused before it is followed. */
	w64(&f, task_va(P1) + f.off.task_tasks, 0x400000);
	list = walk(&f, 0);
	cr_expect(list->truncated);
	cr_expect_eq(list->error->code, IVM_ERROR_PROTOCOL);
	ivm_guest_task_list_destroy(list);
	fixture_fini(&f);
}

Test(kernel_layout, cap_truncates)
{
	struct fixture f;
	struct ivm_guest_task_list *list;

	fixture_init(&f);
	list = walk(&f, 3);
	cr_expect(list->truncated);
	cr_expect_eq(list->nr, 3);
	cr_expect(strstr(ivm_error_string(list->error), "more than 3"));
	ivm_guest_task_list_destroy(list);
	fixture_fini(&f);
}

Test(kernel_layout, comm_without_nul)
{
	struct fixture f;
	struct ivm_kernel_layout *l;
	struct ivm_guest_task t;

	fixture_init(&f);
	memset(at(&f, task_va(P1) + f.off.task_comm), 'A', 16);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_read_task(l, task_va(P1), &t));
	cr_expect_eq(strlen(t.comm), 16);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * on_cpu says whether a task's saved switch frame is its stack; a kernel
 * without the member reads as "not on a CPU", whatever the bytes there.
 */
Test(kernel_layout, on_cpu_read_when_the_kernel_has_it)
{
	struct fixture f;
	struct ivm_kernel_layout *l;
	struct ivm_guest_task t;

	fixture_init(&f);
	cr_assert_eq(f.off.task_on_cpu, 40);
	w32(&f, task_va(P1) + 40, 1);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_read_task(l, task_va(P1), &t));
	cr_expect(t.on_cpu);
	cr_assert_null(ivm_kernel_read_task(l, task_va(T51), &t));
	cr_expect_not(t.on_cpu);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);

	fixture_init_with(&f, true);
	cr_assert_eq(f.off.task_on_cpu, IVM_KOFF_NONE);
	w32(&f, task_va(P1) + 40, 1);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_read_task(l, task_va(P1), &t));
	cr_expect_not(t.on_cpu);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * Who ran last on an idle CPU: the greatest se.exec_start among the tasks
 * of that CPU, never an idle task, one still on a CPU, or the helper's.
 * CPU 1 holds init (pid 1) and sleeper-t2 (52); CPU 0 sleeper (50) and
 * sleeper-t1 (51).
 */
Test(kernel_layout, cpu_switches_per_cpu)
{
	struct ivm_kernel_layout *l;
	struct fixture f;
	struct ivm_error *err;
	uint64_t va, n;

	fixture_init(&f);
	cr_assert_eq(f.off.rq_nr_switches, RQ_NR_SWITCHES);
	w64(&f, DM(PA_PCPU0) + PCPU_RUNQUEUES + RQ_NR_SWITCHES, 1234);
	w64(&f, DM(PA_PCPU1) + PCPU_RUNQUEUES + RQ_NR_SWITCHES, 98765);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_cpu_switches_va(l, 1, &va));
	cr_expect_eq(va, DM(PA_PCPU1) + PCPU_RUNQUEUES + RQ_NR_SWITCHES);
	cr_assert_null(ivm_kernel_cpu_switches(l, 0, &n));
	cr_expect_eq(n, 1234);
	cr_assert_null(ivm_kernel_cpu_switches(l, 1, &n));
	cr_expect_eq(n, 98765);
	/* Beyond nr_cpu_ids (2 here). */
	err = ivm_kernel_cpu_switches(l, 2, &n);
	cr_expect(err && err->code == IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);

	/* A kernel whose BTF has no rq.nr_switches. */
	fixture_init_with(&f, true);
	l = create_ok(&f);
	err = ivm_kernel_cpu_switches(l, 0, &n);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * A span of a kernel object as one physical piece: only if its pages are
 * adjacent in guest physical memory.  Four 4 KiB pages above the image:
 * the first two apart, the second and third adjacent, the fourth absent.
 */
Test(kernel_layout, translate_range)
{
	uint64_t va = KVA(LINK_BASE) + (2u << 20), pa = 0;
	struct ivm_kernel_layout *l;
	struct ivm_error *err;
	struct fixture f;

	fixture_init(&f);
	pte(f.a + PA_PD_K, idx(va, 2), 0x8000 | 3);
	pte(f.a + 0x8000, 0, 0xa000 | 3);
	pte(f.a + 0x8000, 1, 0xc000 | 3);
	pte(f.a + 0x8000, 2, 0xd000 | 3);
	l = create_ok(&f);
	err = ivm_kernel_translate_range(l, va + 0xff0, 0x20, &pa);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND, "%s",
		  err ? ivm_error_string(err) : "no error");
	ivm_error_destroy(err);
	cr_assert_null(ivm_kernel_translate_range(l, va + 0x1ff0, 0x20, &pa));
	cr_expect_eq(pa, 0xcff0);
	cr_assert_null(ivm_kernel_translate_range(l, va + 0x10, 0x20, &pa));
	cr_expect_eq(pa, 0xa010);
	/* Running into the absent page: the walk's error. */
	err = ivm_kernel_translate_range(l, va + 0x2ff0, 0x20, &pa);
	cr_expect(err && err->code != IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	/* The direct map, by arithmetic, is adjacent across pages. */
	cr_assert_null(ivm_kernel_translate_range(l, DM(0x40ff0), 0x20, &pa));
	cr_expect_eq(pa, 0x40ff0);
	err = ivm_kernel_translate_range(l, ~0ull - 8, 0x20, &pa);
	cr_expect(err && err->code == IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(kernel_layout, hostile_per_cpu_data)
{
	struct fixture f;
	struct ivm_error *err;

	fixture_init(&f);
	/* A huge nr_cpu_ids is capped, and then the offsets are bogus. */
	w32(&f, KVA(L_NR_CPU_IDS), 0xffffffffu);
	err = create_err(&f);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL, "%s",
		     ivm_error_string(err));
	ivm_error_destroy(err);
	w32(&f, KVA(L_NR_CPU_IDS), 0);
	err = create_err(&f);
	ivm_error_destroy(err);
	w32(&f, KVA(L_NR_CPU_IDS), 2);
	w64(&f, KVA(L_PER_CPU_OFFSET) + 8, 0x1000);
	err = create_err(&f);
	cr_expect(strstr(ivm_error_string(err), "__per_cpu_offset[1]"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
	w64(&f, KVA(L_PER_CPU_OFFSET) + 8, DM(PA_PCPU1));
	w64(&f, KVA(L_MAX_PFN), ~0ull);
	err = create_err(&f);
	cr_expect(strstr(ivm_error_string(err), "max_pfn"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
	fixture_fini(&f);
}
