// SPDX-License-Identifier: MIT
/*
 * The hinted task-list walk (kernel_layout.h, ivm_kernel_task_list_hinted)
 * over the synthetic guest: whatever the hint, it must give the list the
 * plain walk gives, taking the tasks it can from its batch.
 */
#include "synth_guest.h"

#define PA_NEW(i) (0x100000ull + (i) * 0x2000ull)	/* forked tasks */

static void expect_same(const struct ivm_guest_task_list *a,
			const struct ivm_guest_task_list *b)
{
	size_t i;

	cr_assert_eq(a->nr, b->nr, "%zu tasks against %zu", a->nr, b->nr);
	cr_expect_eq(a->truncated, b->truncated);
	for (i = 0; i < a->nr; i++) {
		const struct ivm_guest_task *x = &a->tasks[i], *y = &b->tasks[i];

		cr_expect_eq(x->addr, y->addr, "task %zu", i);
		cr_expect_eq(x->pid, y->pid, "task %zu", i);
		cr_expect_eq(x->tgid, y->tgid, "task %zu", i);
		cr_expect_str_eq(x->comm, y->comm);
		cr_expect_eq(x->cpu, y->cpu, "task %zu", i);
		cr_expect_eq(x->signal, y->signal, "task %zu", i);
		cr_expect_eq(x->nvcsw, y->nvcsw, "task %zu", i);
		cr_expect_eq(x->thread_sp, y->thread_sp, "task %zu", i);
		cr_expect_eq(x->is_idle, y->is_idle, "task %zu", i);
	}
}

static uint64_t *addresses(const struct ivm_guest_task_list *list)
{
	uint64_t *a = calloc(list->nr ? list->nr : 1, sizeof(*a));
	size_t i;

	cr_assert_not_null(a);
	for (i = 0; i < list->nr; i++)
		a[i] = list->tasks[i].addr;
	return a;
}

/* The plain walk and the hinted one, compared; the hinted one returned. */
static struct ivm_guest_task_list *
walk_both(const struct ivm_kernel_layout *l, const uint64_t *hint,
	  size_t nr_hint)
{
	struct ivm_guest_task_list *plain, *hinted;

	cr_assert_null(ivm_kernel_task_list(l, 0, &plain));
	cr_assert_null(ivm_kernel_task_list_hinted(l, 0, hint, nr_hint,
						   &hinted));
	expect_same(plain, hinted);
	cr_expect_eq(plain->prefetched, 0);
	ivm_guest_task_list_destroy(plain);
	return hinted;
}

Test(task_list_hinted, the_walk_before_as_hint_reads_it_in_the_batch)
{
	struct ivm_guest_task_list *first, *list;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t *hint;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_task_list(l, 0, &first));
	cr_assert_eq(first->nr, 6);
	hint = addresses(first);
	list = walk_both(l, hint, first->nr);
	cr_expect_not(list->truncated);
	/* Every task met was in the batch, the idle tasks too. */
	cr_expect_eq(list->prefetched, 6, "%zu", list->prefetched);
	ivm_guest_task_list_destroy(list);
	/* No hint: the plain walk. */
	list = walk_both(l, NULL, 0);
	cr_expect_eq(list->prefetched, 0);
	ivm_guest_task_list_destroy(list);
	free(hint);
	ivm_guest_task_list_destroy(first);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * After the hint: P1 exits (unlinked from the process list), a process
 * forks (P3, linked at the tail as the kernel does) and P2 gains a
 * thread.  The hinted walk meets the new tasks live and the rest from
 * the batch, and never the task gone.
 */
Test(task_list_hinted, forks_and_exits_since_the_hint)
{
	const struct ivm_kernel_offsets *o;
	struct ivm_guest_task_list *first, *list;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t *hint, p3, t53;
	size_t i;

	fixture_init(&f);
	o = &f.off;
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_task_list(l, 0, &first));
	hint = addresses(first);

	p3 = DM(PA_NEW(0));
	t53 = DM(PA_NEW(1));
	set_task(&f, p3, 60, 60, "forked", DM(PA_SIGNAL(3)), DM(PA_MM), 1);
	set_task(&f, t53, 53, 50, "sleeper-t3", DM(PA_SIGNAL(2)), DM(PA_MM),
		 0);
	{
		const uint64_t procs[] = { task_va(P2) + o->task_tasks,
					   p3 + o->task_tasks };
		const uint64_t t3[] = { p3 + o->task_thread_node };
		const uint64_t t2[] = { task_va(P2) + o->task_thread_node,
					task_va(T51) + o->task_thread_node,
					task_va(T52) + o->task_thread_node,
					t53 + o->task_thread_node };

		link_ring(&f, ivm_kernel_layout_init_task(l) + o->task_tasks,
			  procs, 2);
		link_ring(&f, DM(PA_SIGNAL(3)) + o->signal_thread_head, t3, 1);
		link_ring(&f, DM(PA_SIGNAL(2)) + o->signal_thread_head, t2, 4);
	}
	list = walk_both(l, hint, first->nr);
	cr_expect_eq(list->nr, 7, "%zu", list->nr);
	for (i = 0; i < list->nr; i++)
		cr_expect_neq(list->tasks[i].pid, 1, "the task gone was met");
	/* swapper/0, P2, T51, T52, swapper/1 from the batch; P3, T53 not. */
	cr_expect_eq(list->prefetched, 5, "%zu", list->prefetched);
	ivm_guest_task_list_destroy(list);
	free(hint);
	ivm_guest_task_list_destroy(first);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/* Hints the guest could make, or garbage: the same list, no crash. */
Test(task_list_hinted, hints_that_name_no_task)
{
	struct ivm_guest_task_list *list;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t hint[1100];
	size_t i, n = 0;

	fixture_init(&f);
	l = create_ok(&f);
	hint[n++] = 0;
	hint[n++] = 0x400000;			/* user space */
	hint[n++] = UINT64_MAX - 8;		/* its span wraps */
	hint[n++] = DM(PA_MM);			/* no task */
	hint[n++] = DM(PA_SIGNAL(2));		/* nor this */
	hint[n++] = 0xffffc90000001000ull;	/* unmapped vmalloc */
	hint[n++] = DM(0x7fff0000ull);		/* past the guest's RAM */
	for (i = 0; n < 1100; i++)
		hint[n++] = task_va((int)(i % 3));	/* hinted again */
	list = walk_both(l, hint, n);
	cr_expect_not(list->truncated, "%s",
		      list->error ? ivm_error_string(list->error) : "");
	ivm_guest_task_list_destroy(list);
	/* Without the hint past RAM, the batch is read and used. */
	list = walk_both(l, hint, 6);
	ivm_guest_task_list_destroy(list);
	list = walk_both(l, hint + 7, 3);
	cr_expect_eq(list->prefetched, 3, "%zu", list->prefetched);
	ivm_guest_task_list_destroy(list);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * The links taken from the batch are checked as those read live: a thread
 * ring that loops, a process list that loops and a link out of the kernel
 * stop the walk the same way, with the same tasks before.
 */
Test(task_list_hinted, broken_links_from_the_batch_stop_the_walk)
{
	struct ivm_guest_task_list *first, *list;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t *hint, tn, tt;

	fixture_init(&f);
	l = create_ok(&f);
	tn = f.off.task_thread_node;
	tt = f.off.task_tasks;
	cr_assert_null(ivm_kernel_task_list(l, 0, &first));
	hint = addresses(first);

	w64(&f, task_va(T52) + tn, task_va(T51) + tn);
	list = walk_both(l, hint, first->nr);
	cr_expect(list->truncated);
	cr_expect(strstr(ivm_error_string(list->error), "loops"), "%s",
		  ivm_error_string(list->error));
	ivm_guest_task_list_destroy(list);
	w64(&f, task_va(T52) + tn, DM(PA_SIGNAL(2)) + f.off.signal_thread_head);

	w64(&f, task_va(P2) + tt, task_va(P1) + tt);
	list = walk_both(l, hint, first->nr);
	cr_expect(list->truncated);
	cr_expect(strstr(ivm_error_string(list->error), "loops"), "%s",
		  ivm_error_string(list->error));
	ivm_guest_task_list_destroy(list);

	w64(&f, task_va(P1) + tt, 0x400000);
	list = walk_both(l, hint, first->nr);
	cr_expect(list->truncated);
	cr_expect_eq(list->error->code, IVM_ERROR_PROTOCOL, "%s",
		     ivm_error_string(list->error));
	ivm_guest_task_list_destroy(list);
	free(hint);
	ivm_guest_task_list_destroy(first);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/* Kernels that ring threads through the leader (no signal->thread_head). */
Test(task_list_hinted, thread_group_kernels)
{
	struct ivm_guest_task_list *first, *list;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t *hint;

	fixture_init_with(&f, true);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_task_list(l, 0, &first));
	hint = addresses(first);
	list = walk_both(l, hint, first->nr);
	cr_expect_eq(list->nr, 6);
	cr_expect_eq(list->prefetched, 6, "%zu", list->prefetched);
	ivm_guest_task_list_destroy(list);
	free(hint);
	ivm_guest_task_list_destroy(first);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}
