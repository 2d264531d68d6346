// SPDX-License-Identifier: MIT
/*
 * The idle-period machine on synthetic sequences of host events and guest
 * looks: clean periods, vCPU threads that sleep for QEMU's lock with a
 * task current, wakeups that end no period, periods that come and go
 * between two looks, lost host events, and the from-idle task that left
 * before the look.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "profile/idle_periods.h"

#define IDLE 0xffff888000001000ull
#define TASK_A 0xffff888000002000ull
#define TASK_B 0xffff888000003000ull

struct guest_cpu {
	uint64_t current, idle_switches, cpu_switches;
	struct ivm_irq_counts irqs;
};

static struct ivm_idle_obs look(const struct guest_cpu *g, uint64_t t)
{
	struct ivm_idle_obs o = {
		.time_ns = t, .current_ok = true, .current = g->current,
		.current_is_idle = g->current == IDLE,
		.idle_switches_ok = true, .idle_switches = g->idle_switches,
		.cpu_switches_ok = true, .cpu_switches = g->cpu_switches,
		.irqs = g->irqs,
	};
	return o;
}

/* The guest switches to task (from idle: the idle task's count moves). */
static void guest_switch(struct guest_cpu *g, uint64_t task)
{
	if (g->current == IDLE)
		g->idle_switches++;
	g->cpu_switches++;
	g->current = task;
}

static struct ivm_idle_periods *make(void)
{
	struct ivm_idle_periods *ip;

	cr_assert_null(ivm_idle_periods_create(2, &ip));
	return ip;
}

static void init_cpu(struct guest_cpu *g)
{
	memset(g, 0, sizeof(*g));
	g->current = TASK_A;
	g->idle_switches = 100;
	g->cpu_switches = 1000;
	g->irqs.known = (1u << IVM_IRQ_NR_KINDS) - 1;
}

/* A look at vcpu at time t; returns whether it ended a period. */
static bool look_at(struct ivm_idle_periods *ip, uint32_t vcpu,
		    const struct guest_cpu *g, uint64_t t,
		    struct ivm_idle_period *p)
{
	struct ivm_idle_obs o = look(g, t);

	return ivm_idle_periods_observe(ip, vcpu, &o, p);
}

/* A seen at 0; then A goes idle and the thread sleeps at ts, seen at ts+1. */
static void begin_idle(struct ivm_idle_periods *ip, uint32_t vcpu,
		       struct guest_cpu *g, uint64_t ts)
{
	struct ivm_idle_period p;

	init_cpu(g);
	cr_assert_not(look_at(ip, vcpu, g, 0, &p));
	guest_switch(g, IDLE);
	ivm_idle_periods_host_sleep(ip, vcpu, ts);
	cr_assert_not(look_at(ip, vcpu, g, ts + 1, &p));
}

Test(idle_periods, clean_period_with_stamps_and_timer_wake)
{
	struct ivm_idle_periods *ip = make();
	struct guest_cpu g;
	struct ivm_idle_period p;
	struct ivm_idle_obs o;
	uint64_t start;

	init_cpu(&g);
	o = look(&g, 100);
	cr_assert_not(ivm_idle_periods_observe(ip, 0, &o, &p));
	/* A goes to idle; the vCPU halts; the thread sleeps at 200. */
	guest_switch(&g, IDLE);
	ivm_idle_periods_host_sleep(ip, 0, 200);
	o = look(&g, 210);
	cr_assert_not(ivm_idle_periods_observe(ip, 0, &o, &p));
	cr_assert(ivm_idle_periods_open_start(ip, 0, &start));
	cr_assert_eq(start, 200);
	ivm_idle_periods_set_to_idle(ip, 0, TASK_A);
	/* The timer fires at 900: woken, B dispatched. */
	g.irqs.count[IVM_IRQ_TIMER]++;
	ivm_idle_periods_host_wake(ip, 0, 900);
	ivm_idle_periods_host_wake(ip, 0, 901);	/* sched_wakeup of the same */
	guest_switch(&g, TASK_B);
	o = look(&g, 950);
	cr_assert(ivm_idle_periods_observe(ip, 0, &o, &p));
	cr_assert_eq(p.vcpu, 0);
	cr_assert_eq(p.start_ns, 200);
	cr_assert_eq(p.end_ns, 900);
	cr_assert_eq(p.to_idle_task, TASK_A);
	cr_assert_eq(p.from_idle_task, TASK_B);
	cr_assert(p.flags & IVM_IDLE_FROM_IDLE_KNOWN);
	cr_assert(p.flags & IVM_IDLE_START_FROM_EVENT);
	cr_assert(p.flags & IVM_IDLE_END_FROM_EVENT);
	cr_assert_eq(p.wake_mask, 1u << IVM_IRQ_TIMER);
	cr_assert_eq(p.halts, 1);
	cr_assert_eq(p.after.idle_switches - p.before.idle_switches, 1);
	cr_assert_eq(ivm_idle_periods_stats(ip)->host_wakes, 1);
	cr_assert_eq(ivm_idle_periods_stats(ip)->host_sleeps_idle, 1);
	cr_assert_eq(ivm_idle_periods_stats(ip)->periods_ended, 1);
	/* Ended: none under way.  Idle again, no sleep to stamp it by. */
	cr_assert_not(ivm_idle_periods_open_start(ip, 0, &start));
	guest_switch(&g, IDLE);
	o = look(&g, 1000);
	cr_assert_not(ivm_idle_periods_observe(ip, 0, &o, &p));
	cr_assert(ivm_idle_periods_opened(ip, 0));
	cr_assert_not(ivm_idle_periods_open_start(ip, 0, &start));
	ivm_idle_periods_destroy(ip);
}

/*
 * Two idle periods between two looks, with their host events: the
 * period the first look saw ends at the first wakeup, but the last wakeup
 * (1500) ended the second one, so it is not the first one's end; the end
 * is the look's, for the caller to set from the guest's stamps.
 */
Test(idle_periods, the_last_wakeup_is_not_the_end_of_an_earlier_period)
{
	struct ivm_idle_periods *ip = make();
	struct guest_cpu g;
	struct ivm_idle_period p;
	struct ivm_idle_obs o;

	begin_idle(ip, 0, &g, 200);
	ivm_idle_periods_host_wake(ip, 0, 900);
	guest_switch(&g, TASK_B);
	guest_switch(&g, IDLE);
	ivm_idle_periods_host_sleep(ip, 0, 1000);
	ivm_idle_periods_host_wake(ip, 0, 1500);
	guest_switch(&g, TASK_A);
	o = look(&g, 1600);
	cr_assert(ivm_idle_periods_observe(ip, 0, &o, &p));
	cr_assert_eq(p.start_ns, 200);
	cr_assert_eq(p.end_ns, 1600);
	cr_assert_not(p.flags & IVM_IDLE_END_FROM_EVENT);
	cr_assert_eq(ivm_idle_periods_stats(ip)->unseen_periods, 1);
	ivm_idle_periods_destroy(ip);
}

Test(idle_periods, lock_sleeps_with_a_task_current_are_not_idle)
{
	struct ivm_idle_periods *ip = make();
	struct guest_cpu g;
	struct ivm_idle_period p;
	struct ivm_idle_obs o;
	int i;

	init_cpu(&g);
	o = look(&g, 10);
	ivm_idle_periods_observe(ip, 0, &o, &p);
	/* QEMU's big lock: the thread sleeps and wakes, A stays current. */
	for (i = 0; i < 5; i++) {
		ivm_idle_periods_host_sleep(ip, 0, 100 + i * 10);
		o = look(&g, 101 + i * 10);
		cr_assert_not(ivm_idle_periods_observe(ip, 0, &o, &p));
		ivm_idle_periods_host_wake(ip, 0, 105 + i * 10);
		}
	cr_assert_eq(ivm_idle_periods_stats(ip)->host_sleeps, 5);
	cr_assert_eq(ivm_idle_periods_stats(ip)->host_sleeps_busy, 5);
	cr_assert_eq(ivm_idle_periods_stats(ip)->host_sleeps_idle, 0);
	cr_assert_eq(ivm_idle_periods_stats(ip)->periods_seen, 0);
	ivm_idle_periods_destroy(ip);
}

Test(idle_periods, wake_without_dispatch_keeps_the_period)
{
	struct ivm_idle_periods *ip = make();
	struct guest_cpu g;
	struct ivm_idle_period p;
	struct ivm_idle_obs o;

	begin_idle(ip, 0, &g, 100);
	/* A timer with nothing to run: woken, looked at idle, halts again. */
	g.irqs.count[IVM_IRQ_TIMER]++;
	ivm_idle_periods_host_wake(ip, 0, 200);
	o = look(&g, 201);
	cr_assert_not(ivm_idle_periods_observe(ip, 0, &o, &p));
	ivm_idle_periods_host_sleep(ip, 0, 210);
	o = look(&g, 211);
	cr_assert_not(ivm_idle_periods_observe(ip, 0, &o, &p));
	/* Then a device interrupt wakes A. */
	g.irqs.count[IVM_IRQ_DEVICE]++;
	ivm_idle_periods_host_wake(ip, 0, 500);
	guest_switch(&g, TASK_A);
	o = look(&g, 520);
	cr_assert(ivm_idle_periods_observe(ip, 0, &o, &p));
	cr_assert_eq(p.start_ns, 100);
	cr_assert_eq(p.end_ns, 500);
	cr_assert_eq(p.halts, 2);
	/* What woke it for good, not the timer of the first wakeup. */
	cr_assert_eq(p.wake_mask, 1u << IVM_IRQ_DEVICE);
	cr_assert_eq(p.after.irqs.count[IVM_IRQ_TIMER] -
		     p.before.irqs.count[IVM_IRQ_TIMER], 1);
	cr_assert_eq(ivm_idle_periods_stats(ip)->wakes_no_switch, 1);
	ivm_idle_periods_destroy(ip);
}

/*
 * The same with the idle gate: the timer's halt is let pass unlooked at
 * (a quiet sleep), and the next record hands over its interrupt counts:
 * what woke the vCPU for good is still the device, not the timer.
 */
Test(idle_periods, gate_passed_halt_keeps_the_wake_cause)
{
	struct ivm_idle_periods *ip = make();
	struct guest_cpu g;
	struct ivm_idle_period p;
	struct ivm_idle_obs o;

	begin_idle(ip, 0, &g, 100);
	g.irqs.count[IVM_IRQ_TIMER]++;
	ivm_idle_periods_host_wake(ip, 0, 200);
	ivm_idle_periods_host_sleep_quiet(ip, 0);
	/* Nothing switched: no look.  A device interrupt wakes A. */
	g.irqs.count[IVM_IRQ_DEVICE]++;
	ivm_idle_periods_host_wake(ip, 0, 500);
	guest_switch(&g, TASK_A);
	/* The gate's record for A's sleep: one passed, at 210. */
	g.irqs.count[IVM_IRQ_DEVICE]--;
	ivm_idle_periods_passed(ip, 0, 1, 210, &g.irqs);
	g.irqs.count[IVM_IRQ_DEVICE]++;
	o = look(&g, 520);
	cr_assert(ivm_idle_periods_observe(ip, 0, &o, &p));
	cr_assert_eq(p.start_ns, 100);
	cr_assert_eq(p.end_ns, 500);
	cr_assert_eq(p.halts, 2);
	cr_assert_eq(p.wake_mask, 1u << IVM_IRQ_DEVICE);
	cr_assert_eq(ivm_idle_periods_stats(ip)->wakes_no_switch, 1);
	cr_assert_eq(ivm_idle_periods_stats(ip)->halts_passed, 1);
	/* Counts older than the period's own are not taken. */
	ivm_idle_periods_passed(ip, 0, 1, 50, &g.irqs);
	cr_assert_eq(ivm_idle_periods_stats(ip)->halts_passed, 1);
	ivm_idle_periods_destroy(ip);
}

Test(idle_periods, periods_between_looks_are_counted_not_invented)
{
	struct ivm_idle_periods *ip = make();
	struct guest_cpu g;
	struct ivm_idle_period p;
	struct ivm_idle_obs o, before;
	int i;

	init_cpu(&g);
	o = look(&g, 0);
	ivm_idle_periods_observe(ip, 0, &o, &p);
	/* Three idle periods come and go, all host events lost. */
	for (i = 0; i < 3; i++) {
		guest_switch(&g, IDLE);
		guest_switch(&g, i & 1 ? TASK_A : TASK_B);
	}
	ivm_idle_periods_host_lost(ip, 6);
	o = look(&g, 1000);
	cr_assert_not(ivm_idle_periods_observe(ip, 0, &o, &p));
	cr_assert_eq(ivm_idle_periods_stats(ip)->unseen_periods, 3);
	cr_assert_eq(ivm_idle_periods_stats(ip)->lost_events, 6);
	cr_assert_eq(ivm_idle_periods_stats(ip)->periods_seen, 0);
	/* For a rebuild: the three, and the look before them (A running). */
	cr_assert_eq(ivm_idle_periods_unseen_last(ip, 0, &before), 3);
	cr_assert_eq(before.time_ns, 0);
	cr_assert_eq(before.current, TASK_A);
	cr_assert_eq(before.cpu_switches, 1000);
	cr_assert_eq(before.idle_switches, 100);
	/* Seen idle, then two more periods unseen before the next look. */
	guest_switch(&g, IDLE);
	o = look(&g, 1100);
	ivm_idle_periods_observe(ip, 0, &o, &p);
	guest_switch(&g, TASK_A);
	guest_switch(&g, IDLE);
	guest_switch(&g, TASK_B);
	guest_switch(&g, IDLE);
	o = look(&g, 1200);
	/* The seen one ends (its first task gone: from-idle unknown)... */
	cr_assert(ivm_idle_periods_observe(ip, 0, &o, &p));
	cr_assert_not(p.flags & IVM_IDLE_FROM_IDLE_KNOWN);
	cr_assert_eq(p.from_idle_task, 0);
	cr_assert_not(p.flags & IVM_IDLE_END_FROM_EVENT);
	cr_assert_eq(ivm_idle_periods_stats(ip)->from_idle_late, 1);
	/* ...one in between is unseen, and the current one is open. */
	cr_assert_eq(ivm_idle_periods_stats(ip)->unseen_periods, 4);
	cr_assert_eq(ivm_idle_periods_stats(ip)->periods_seen, 2);
	cr_assert_eq(ivm_idle_periods_unseen_last(ip, 0, &before), 1);
	cr_assert_eq(before.time_ns, 1100);
	cr_assert(before.current_is_idle);
	/* A look that found none: nothing to rebuild. */
	o = look(&g, 1300);
	ivm_idle_periods_observe(ip, 0, &o, &p);
	cr_assert_eq(ivm_idle_periods_unseen_last(ip, 0, &before), 0);
	ivm_idle_periods_destroy(ip);
}

Test(idle_periods, from_idle_task_that_already_left)
{
	struct ivm_idle_periods *ip = make();
	struct guest_cpu g;
	struct ivm_idle_period p;
	struct ivm_idle_obs o;

	begin_idle(ip, 0, &g, 10);
	ivm_idle_periods_host_wake(ip, 0, 50);
	guest_switch(&g, TASK_A);	/* first after idle */
	guest_switch(&g, TASK_B);	/* A blocked (no idle), B runs */
	o = look(&g, 80);
	cr_assert(ivm_idle_periods_observe(ip, 0, &o, &p));
	cr_assert_eq(p.from_idle_task, 0, "B is not the first after idle");
	cr_assert_eq(p.end_ns, 50);
	ivm_idle_periods_destroy(ip);
}

Test(idle_periods, sleep_seen_after_its_wakeup)
{
	struct ivm_idle_periods *ip = make();
	struct guest_cpu g;
	struct ivm_idle_period p;
	struct ivm_idle_obs o;

	init_cpu(&g);
	o = look(&g, 0);
	ivm_idle_periods_observe(ip, 0, &o, &p);
	/*
	 * Idle, halt, wake and dispatch all before the next look (the
	 * events arrive in one batch): the sleep is judged idle because the
	 * idle count moved, the period is unseen (its start never looked at).
	 */
	guest_switch(&g, IDLE);
	ivm_idle_periods_host_sleep(ip, 1 - 1, 100);
	ivm_idle_periods_host_wake(ip, 0, 200);
	guest_switch(&g, TASK_B);
	o = look(&g, 300);
	cr_assert_not(ivm_idle_periods_observe(ip, 0, &o, &p));
	cr_assert_eq(ivm_idle_periods_stats(ip)->host_sleeps_idle, 1);
	cr_assert_eq(ivm_idle_periods_stats(ip)->unseen_periods, 1);
	/* A vCPU out of range and a look without current change nothing. */
	ivm_idle_periods_host_sleep(ip, 7, 1);
	o.current_ok = false;
	cr_assert_not(ivm_idle_periods_observe(ip, 0, &o, &p));
	cr_assert_not(ivm_idle_periods_observe(ip, 9, &o, &p));
	ivm_idle_periods_destroy(ip);
}

Test(idle_periods, own_helper_runs_do_not_end_the_period)
{
	struct ivm_idle_periods *ip = make();
	struct guest_cpu g;
	struct ivm_idle_period p;
	struct ivm_idle_obs o;

	begin_idle(ip, 1, &g, 10);
	/* idlevm's pin holder runs there and leaves. */
	guest_switch(&g, TASK_B);
	guest_switch(&g, IDLE);
	o = look(&g, 40);
	cr_assert_not(ivm_idle_periods_rebase(ip, 1, &o, &p));
	cr_assert_eq(ivm_idle_periods_stats(ip)->own_switches, 1);
	/* The real end: A is first after idle. */
	ivm_idle_periods_host_wake(ip, 1, 90);
	guest_switch(&g, TASK_A);
	o = look(&g, 95);
	cr_assert(ivm_idle_periods_observe(ip, 1, &o, &p));
	cr_assert_eq(p.start_ns, 10);
	cr_assert_eq(p.from_idle_task, TASK_A);
	cr_assert_eq(ivm_idle_periods_stats(ip)->unseen_periods, 0);
	ivm_idle_periods_destroy(ip);
}

Test(idle_periods, kvm_exit_reason_travels_with_the_period)
{
	struct ivm_idle_periods *ip = make();
	struct guest_cpu g;
	struct ivm_idle_period p;
	struct ivm_idle_obs o;

	begin_idle(ip, 0, &g, 10);
	/* Read after the sleep (its record came later in the batch). */
	ivm_idle_periods_host_halt_exit(ip, 0, 12, 9);	/* VMX HLT */
	g.irqs.count[IVM_IRQ_RESCHED]++;
	ivm_idle_periods_host_wake(ip, 0, 20);
	guest_switch(&g, TASK_A);
	o = look(&g, 30);
	cr_assert(ivm_idle_periods_observe(ip, 0, &o, &p));
	cr_assert(p.flags & IVM_IDLE_EXIT_REASON);
	cr_assert_eq(p.exit_reason, 12);
	cr_assert_eq(p.wake_mask, 1u << IVM_IRQ_RESCHED);
	ivm_idle_periods_destroy(ip);
}

/* A seen on vCPU 0 at 0; A goes idle, the vCPU exits for HLT at 10. */
static void begin_kvm_halt(struct ivm_idle_periods *ip, struct guest_cpu *g,
			   uint32_t exit_reason)
{
	struct ivm_idle_period p;

	init_cpu(g);
	cr_assert_not(look_at(ip, 0, g, 0, &p));
	guest_switch(g, IDLE);
	ivm_idle_periods_host_halt_exit(ip, 0, exit_reason, 10);
	cr_assert_not(look_at(ip, 0, g, 11, &p));
}

/*
 * KVM with halt polling: a halt that ends while KVM polls never reaches the
 * scheduler.  Its HLT exit starts it, kvm_vcpu_wakeup ends it, and the
 * period is whole: start at the exit, the first task after it named.
 */
Test(idle_periods, kvm_halt_ended_while_polling)
{
	struct ivm_idle_periods *ip = make();
	const struct ivm_idle_stats *st = ivm_idle_periods_stats(ip);
	struct guest_cpu g;
	struct ivm_idle_period p;

	begin_kvm_halt(ip, &g, 0x78);	/* SVM HLT */
	g.irqs.count[IVM_IRQ_TIMER]++;
	ivm_idle_periods_host_halt_end(ip, 0, false, 40);
	guest_switch(&g, TASK_A);
	cr_assert(look_at(ip, 0, &g, 45, &p));
	cr_expect_eq(p.start_ns, 10);
	cr_expect_eq(p.from_idle_task, TASK_A);
	cr_expect(p.flags & IVM_IDLE_EXIT_REASON);
	cr_expect_eq(p.exit_reason, 0x78);
	cr_expect_eq(st->kvm_halt_exits, 1);
	cr_expect_eq(st->kvm_halts_polled, 1);
	cr_expect_eq(st->kvm_halts_slept, 0);
	cr_expect_eq(st->host_sleeps, 1);
	cr_expect_eq(st->host_wakes, 1);
	cr_expect_eq(st->host_sleeps_idle, 1);
	ivm_idle_periods_destroy(ip);
}

/*
 * The same halt seen three times: its HLT exit, the thread's sleep once
 * polling gave up, its sched wakeup and then kvm_vcpu_wakeup.  One halt,
 * one wake, and the period starts at the exit.
 */
Test(idle_periods, kvm_halt_then_sleep_is_one_halt)
{
	struct ivm_idle_periods *ip = make();
	const struct ivm_idle_stats *st = ivm_idle_periods_stats(ip);
	struct guest_cpu g;
	struct ivm_idle_period p;

	begin_kvm_halt(ip, &g, 12);	/* VMX HLT */
	ivm_idle_periods_host_sleep(ip, 0, 210);	/* polling gave up */
	cr_assert_not(look_at(ip, 0, &g, 211, &p));
	ivm_idle_periods_host_wake(ip, 0, 500);
	ivm_idle_periods_host_halt_end(ip, 0, true, 520);
	guest_switch(&g, TASK_B);
	cr_assert(look_at(ip, 0, &g, 530, &p));
	cr_expect_eq(p.start_ns, 10);
	cr_expect_eq(p.from_idle_task, TASK_B);
	cr_expect_eq(st->host_sleeps, 1);
	cr_expect_eq(st->host_wakes, 1);
	cr_expect_eq(st->kvm_halts_slept, 1);
	/* The next sleep, with no HLT exit (QEMU's lock), is a sleep again. */
	ivm_idle_periods_host_sleep(ip, 0, 600);
	cr_expect_eq(st->host_sleeps, 2);
	ivm_idle_periods_destroy(ip);
}

/* The look right after the wakeup names the cause; later ones add noise. */
Test(idle_periods, wake_cause_from_the_first_look_after_the_wakeup)
{
	struct ivm_idle_periods *ip = make();
	struct guest_cpu g;
	struct ivm_idle_period p;

	begin_idle(ip, 0, &g, 10);
	ivm_idle_periods_host_wake(ip, 0, 20);
	g.irqs.count[IVM_IRQ_RESCHED]++;
	cr_assert_not(look_at(ip, 0, &g, 21, &p));
	/* The timer ticks before the look that sees the switch. */
	g.irqs.count[IVM_IRQ_TIMER]++;
	guest_switch(&g, TASK_A);
	cr_assert(look_at(ip, 0, &g, 60, &p));
	cr_assert_eq(p.wake_mask, 1u << IVM_IRQ_RESCHED);
	ivm_idle_periods_destroy(ip);
}

/*
 * How long after each idle halt its look came: within 100 us, within 1 ms,
 * later; sleeps that were no idle halt (QEMU's lock) are not counted, and
 * a halt judged after the vCPU woke (the idle count moved) is, from the
 * sleep's stamp.
 */
Test(idle_periods, delay_of_the_look_after_each_idle_halt)
{
	static const uint64_t delay[] = { 40000, 99999, 100000, 700000,
					  1000000, 3000000 };
	struct ivm_idle_periods *ip = make();
	const struct ivm_idle_stats *st = ivm_idle_periods_stats(ip);
	struct guest_cpu g;
	struct ivm_idle_period p;
	struct ivm_idle_obs o;
	uint64_t t = 1000000;
	size_t i;

	init_cpu(&g);
	o = look(&g, t);
	ivm_idle_periods_observe(ip, 0, &o, &p);
	for (i = 0; i < sizeof(delay) / sizeof(delay[0]); i++) {
		t += 10000000;
		guest_switch(&g, IDLE);
		ivm_idle_periods_host_sleep(ip, 0, t);
		o = look(&g, t + delay[i]);
		ivm_idle_periods_observe(ip, 0, &o, &p);
		t += 5000000;
		ivm_idle_periods_host_wake(ip, 0, t);
		guest_switch(&g, TASK_A);
		o = look(&g, t + 1000);
		ivm_idle_periods_observe(ip, 0, &o, &p);
	}
	cr_assert_eq(st->host_sleeps_idle, 6);
	cr_assert_eq(st->halt_looked_100us, 2);
	cr_assert_eq(st->halt_looked_1ms, 2);
	cr_assert_eq(st->halt_looked_late, 2);

	/* QEMU's lock with A current: not an idle halt, not counted. */
	t += 10000000;
	ivm_idle_periods_host_sleep(ip, 0, t);
	o = look(&g, t + 5000000);
	ivm_idle_periods_observe(ip, 0, &o, &p);
	ivm_idle_periods_host_wake(ip, 0, t + 5000100);
	cr_assert_eq(st->host_sleeps_busy, 1);
	cr_assert_eq(st->halt_looked_late, 2);

	/*
	 * Idle and woken again before the look: judged idle by the moved
	 * count, 2 ms after the sleep.
	 */
	t += 10000000;
	guest_switch(&g, IDLE);
	ivm_idle_periods_host_sleep(ip, 0, t);
	ivm_idle_periods_host_wake(ip, 0, t + 30000);
	guest_switch(&g, TASK_B);
	o = look(&g, t + 2000000);
	ivm_idle_periods_observe(ip, 0, &o, &p);
	cr_assert_eq(st->host_sleeps_idle, 7);
	cr_assert_eq(st->halt_looked_late, 3);
	cr_assert_eq(st->halt_looked_100us + st->halt_looked_1ms +
		     st->halt_looked_late, st->host_sleeps_idle);
	/* As the run's summary and the report print them. */
	{
		char text[160];

		ivm_idle_looks_text(st, text, sizeof(text));
		cr_assert_str_eq(text, "looks after an idle halt: 2 within 100 us, 2 within 1 ms, 3 later (42.9%)");
	}
	ivm_idle_periods_destroy(ip);
}
