// SPDX-License-Identifier: MIT
/* A run's CPU budget by watched slices of time; see cpu_budget.h. */
#include <string.h>

#include "profile/cpu_budget.h"

/* Weight of the newest slice in the moving averages of cost. */
#define COST_WEIGHT 0.3
/*
 * What the run spent beyond its budget so far (its start included, and
 * the averages' errors) is paid back over this long, or what it spent
 * below it spent: the budget holds over the run, not only slice by slice.
 */
#define DEBT_NS 5000000000.0

void ivm_cpu_budget_init(struct ivm_cpu_budget *b, double percent,
			 uint64_t now)
{
	memset(b, 0, sizeof(*b));
	b->budget = percent > 0 ? percent / 100.0 : 0;
	b->share = 1;
	b->watching = true;
	b->slice_start = now;
	b->cost_on = b->cost_off = -1;
}

static void average(double *avg, double x)
{
	*avg = *avg < 0 ? x : (1 - COST_WEIGHT) * *avg + COST_WEIGHT * x;
}

/* f such that f * c_on + (1 - f) * c_off meets the budget, debts paid. */
static double share_for(const struct ivm_cpu_budget *b)
{
	double off = b->cost_off < 0 ? 0 : b->cost_off, f, target;
	double debt = (double)b->cpu_ns - b->budget * (double)b->total_ns;

	target = b->budget - debt / DEBT_NS;
	if (target > 2 * b->budget)
		target = 2 * b->budget;
	if (b->cost_on < 0 || b->cost_on <= target)
		return 1;
	if (b->cost_on <= off)	/* watching costs nothing more: watch */
		return 1;
	f = (target - off) / (b->cost_on - off);
	if (f < IVM_CPU_BUDGET_MIN_SHARE)
		f = IVM_CPU_BUDGET_MIN_SHARE;
	return f > 1 ? 1 : f;
}

bool ivm_cpu_budget_tick(struct ivm_cpu_budget *b, uint64_t now)
{
	uint64_t wall;
	bool was = b->watching;

	if (now < ivm_cpu_budget_slice_end(b))
		return false;
	/* A late loop closes one long slice, not a burst of short ones. */
	wall = now - b->slice_start;
	b->total_ns += wall;
	b->cpu_ns += b->slice_cpu;
	b->slices++;
	if (b->watching) {
		b->watched_ns += wall;
		b->watched_slices++;
	}
	if (b->budget > 0) {
		average(b->watching ? &b->cost_on : &b->cost_off,
			(double)b->slice_cpu / (double)wall);
		b->share = share_for(b);
		b->credit += b->share;
		b->watching = b->credit >= 1;
		if (b->watching)
			b->credit -= 1;
	}
	b->slice_start = now;
	b->slice_cpu = 0;
	return b->watching != was;
}

uint64_t ivm_cpu_budget_watched_ns(const struct ivm_cpu_budget *b,
				   uint64_t now)
{
	uint64_t ns = b->watched_ns;

	if (b->watching && now > b->slice_start)
		ns += now - b->slice_start;
	return ns;
}
