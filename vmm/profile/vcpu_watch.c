// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "profile/vcpu_watch.h"

/*
 * The words watched per vCPU, read in this order.  A switch writes
 * nr_switches, rq->curr and the leaving task's switch count together,
 * and `current` last, after its stacks: read `current` first and rq->curr
 * after the counts, a read across a switch shows the old task with the
 * new counts only where rq->curr says so (ivm_vcpu_watch_view.mid_switch),
 * but for the few instructions between nr_switches and rq->curr.
 */
enum { W_CURRENT, W_NVCSW, W_NIVCSW, W_SWITCHES, W_RQ_CURR, W_IRQ_STAT,
       W_IRQ_SUM, W_RQ_CLOCK, W_IDLE_STAMP, WORDS_PER_VCPU };

/* irq_stat's fields span less than this (irq_stat.c checks). */
#define MAX_WORD_LEN 512

struct word {
	bool wanted;		/* this word is watched at all */
	uint64_t va;		/* kernel virtual address (not for W_CURRENT) */
	uint64_t pa;		/* valid when mapped */
	bool mapped;
	bool ok;		/* value read in this call */
	uint32_t len;		/* bytes of value: 8, or irq_stat's span */
	uint8_t *value;		/* inline, or irq_block */
	uint8_t inline_value[8];
};

struct ivm_vcpu_watch {
	const struct ivm_kernel_layout *layout;
	struct ivm_gmem *gmem;
	size_t nr;
	int *cpus;
	struct word *words;		/* nr * WORDS_PER_VCPU */
	struct ivm_gmem_piece *pieces;
	size_t *piece_word;
	/* The words by guest physical address, as translate() found them:
	 * a read's pieces in that order share pinned pages (gmem_process.c). */
	size_t *order;
	bool translated;
	uint64_t translated_at;
	struct ivm_vcpu_watch_stats stats;
	const struct ivm_irq_stat *irq_stat;
	uint8_t *irq_blocks;		/* nr * MAX_WORD_LEN */
};

struct ivm_error *ivm_vcpu_watch_create(const struct ivm_kernel_layout *layout,
					struct ivm_gmem *gmem,
					const struct ivm_vcpu_watch_target *targets,
					size_t nr, uint32_t nvcsw_off,
					uint32_t nivcsw_off,
					const struct ivm_irq_stat *irq_stat,
					struct ivm_vcpu_watch **ret)
{
	bool counters = nvcsw_off && nivcsw_off &&
			nvcsw_off != IVM_KOFF_NONE &&
			nivcsw_off != IVM_KOFF_NONE;
	struct ivm_vcpu_watch *w;
	size_t i;

	w = calloc(1, sizeof(*w));
	if (!w)
		return &ivm_enomem;
	w->layout = layout;
	w->gmem = gmem;
	w->nr = nr;
	w->cpus = calloc(nr ? nr : 1, sizeof(*w->cpus));
	w->words = calloc(nr ? nr * WORDS_PER_VCPU : 1, sizeof(*w->words));
	w->pieces = calloc(nr ? nr * WORDS_PER_VCPU : 1, sizeof(*w->pieces));
	w->piece_word = calloc(nr ? nr * WORDS_PER_VCPU : 1,
			       sizeof(*w->piece_word));
	w->order = calloc(nr ? nr * WORDS_PER_VCPU : 1, sizeof(*w->order));
	w->irq_blocks = calloc(nr ? nr : 1, MAX_WORD_LEN);
	if (!w->cpus || !w->words || !w->pieces || !w->piece_word ||
	    !w->order || !w->irq_blocks) {
		ivm_vcpu_watch_destroy(w);
		return &ivm_enomem;
	}
	w->irq_stat = irq_stat;
	for (i = 0; i < nr * WORDS_PER_VCPU; i++) {
		w->words[i].value = w->words[i].inline_value;
		w->words[i].len = 8;
	}
	for (i = 0; i < nr; i++) {
		struct word *wd = &w->words[i * WORDS_PER_VCPU];
		uint64_t idle = targets[i].idle_task;
		struct ivm_irq_stat_words iw;
		struct ivm_error *err;

		w->cpus[i] = targets[i].cpu;
		if (targets[i].cpu < 0)
			continue;
		err = irq_stat ? ivm_irq_stat_words(irq_stat,
						    (unsigned int)targets[i].cpu,
						    &iw) :
			&ivm_enomem;
		if (!err && iw.stat_va && iw.stat_len &&
		    iw.stat_len <= MAX_WORD_LEN) {
			wd[W_IRQ_STAT].wanted = true;
			wd[W_IRQ_STAT].va = iw.stat_va;
			wd[W_IRQ_STAT].len = iw.stat_len;
			wd[W_IRQ_STAT].value = w->irq_blocks + i * MAX_WORD_LEN;
		}
		if (!err && iw.sum_va) {
			wd[W_IRQ_SUM].wanted = true;
			wd[W_IRQ_SUM].va = iw.sum_va;
		}
		if (err != &ivm_enomem)
			ivm_error_destroy(err);
		wd[W_CURRENT].wanted = true;
		if (targets[i].switches_va) {
			wd[W_SWITCHES].wanted = true;
			wd[W_SWITCHES].va = targets[i].switches_va;
		}
		if (targets[i].rq_curr_va) {
			wd[W_RQ_CURR].wanted = true;
			wd[W_RQ_CURR].va = targets[i].rq_curr_va;
		}
		if (targets[i].rq_clock_va) {
			wd[W_RQ_CLOCK].wanted = true;
			wd[W_RQ_CLOCK].va = targets[i].rq_clock_va;
		}
		if (targets[i].rq_idle_stamp_va) {
			wd[W_IDLE_STAMP].wanted = true;
			wd[W_IDLE_STAMP].va = targets[i].rq_idle_stamp_va;
		}
		if (!counters || !idle)
			continue;
		/* A hostile layout cannot make these wrap: checked here. */
		if (idle + nvcsw_off < idle || idle + nivcsw_off < idle)
			continue;
		wd[W_NVCSW].wanted = wd[W_NIVCSW].wanted = true;
		wd[W_NVCSW].va = idle + nvcsw_off;
		wd[W_NIVCSW].va = idle + nivcsw_off;
	}
	*ret = w;
	return NULL;
}

void ivm_vcpu_watch_destroy(struct ivm_vcpu_watch *w)
{
	if (!w)
		return;
	free(w->cpus);
	free(w->words);
	free(w->pieces);
	free(w->piece_word);
	free(w->order);
	free(w->irq_blocks);
	free(w);
}

static int by_pa(const void *a, const void *b, void *words)
{
	const struct word *w = words;
	const struct word *wa = &w[*(const size_t *)a];
	const struct word *wb = &w[*(const size_t *)b];

	return (wa->pa > wb->pa) - (wa->pa < wb->pa);
}

static void translate(struct ivm_vcpu_watch *w, uint64_t now_ns)
{
	size_t i, k;

	for (i = 0; i < w->nr; i++) {
		for (k = 0; k < WORDS_PER_VCPU; k++) {
			struct word *wd = &w->words[i * WORDS_PER_VCPU + k];
			struct ivm_error *err;
			uint64_t pa, contiguous;

			wd->mapped = false;
			if (!wd->wanted)
				continue;
			if (k == W_CURRENT) {
				wd->pa = ivm_kernel_current_pa(
					w->layout, (unsigned int)w->cpus[i]);
				wd->mapped = wd->pa != 0;
				continue;
			}
			err = ivm_kernel_translate(w->layout, wd->va, &pa,
						   &contiguous);
			if (err) {
				ivm_error_destroy(err);
				continue;
			}
			/* A word across a page boundary keeps the slow path. */
			if (contiguous >= wd->len) {
				wd->pa = pa;
				wd->mapped = true;
			}
		}
	}
	for (i = 0; i < w->nr * WORDS_PER_VCPU; i++)
		w->order[i] = i;
	qsort_r(w->order, w->nr * WORDS_PER_VCPU, sizeof(*w->order), by_pa,
		w->words);
	w->translated = true;
	w->translated_at = now_ns;
	w->stats.translations++;
}

/* One word the slow way: a virtual read, page walk included. */
static struct ivm_error *read_word_virt(struct ivm_vcpu_watch *w, size_t vcpu,
					size_t k, struct word *wd)
{
	if (k == W_CURRENT) {
		uint64_t task;
		struct ivm_error *err = ivm_kernel_current_task(
			w->layout, (unsigned int)w->cpus[vcpu], NULL, &task);

		if (!err)
			memcpy(wd->value, &task, sizeof(task));
		return err;
	}
	return ivm_kernel_read(w->layout, wd->va, wd->value, wd->len);
}

/* The words of a read: all, or what tells a switch (ivm_vcpu_watch_read_switches). */
#define ALL_WORDS ((1u << WORDS_PER_VCPU) - 1)
#define SWITCH_WORDS ((1u << W_CURRENT) | (1u << W_NVCSW) | \
		      (1u << W_NIVCSW) | (1u << W_SWITCHES) | (1u << W_RQ_CURR))

/* The batch failed: read each word alone to tell the bad ones apart. */
static struct ivm_error *read_one_by_one(struct ivm_vcpu_watch *w,
					 unsigned int mask)
{
	size_t i, k;

	w->stats.fallbacks++;
	for (i = 0; i < w->nr; i++) {
		for (k = 0; k < WORDS_PER_VCPU; k++) {
			struct word *wd = &w->words[i * WORDS_PER_VCPU + k];
			struct ivm_error *err;

			if (!wd->wanted || wd->ok || !(mask & (1u << k)))
				continue;
			if (wd->mapped)
				err = ivm_gmem_read_phys(w->gmem, wd->pa,
							 wd->value, wd->len);
			else
				err = read_word_virt(w, i, k, wd);
			if (err && err->code == IVM_ERROR_GONE)
				return err;
			wd->ok = !err;
			ivm_error_destroy(err);
		}
	}
	return NULL;
}

static struct ivm_error *read_words(struct ivm_vcpu_watch *w, uint64_t now_ns,
				    struct ivm_vcpu_watch_view *views,
				    uint64_t *failed, unsigned int mask)
{
	size_t i, j, k, n = 0, nr_words = w->nr * WORDS_PER_VCPU;
	bool slow = false;
	struct ivm_error *err;

	if (!w->translated || now_ns - w->translated_at >=
			      IVM_VCPU_WATCH_RETRANSLATE_NS)
		translate(w, now_ns);
	for (j = 0; j < nr_words; j++) {
		struct word *wd;

		i = w->order[j];
		wd = &w->words[i];
		wd->ok = false;
		if (!wd->wanted || !(mask & (1u << (i % WORDS_PER_VCPU))))
			continue;
		if (!wd->mapped) {
			slow = true;
			continue;
		}
		w->pieces[n] = (struct ivm_gmem_piece){
			.gpa = wd->pa, .buf = wd->value, .len = wd->len,
		};
		w->piece_word[n++] = i;
	}
	if (n) {
		w->stats.batches++;
		err = ivm_gmem_read_phys_many(w->gmem, w->pieces, n);
		if (err && err->code == IVM_ERROR_GONE)
			return err;
		if (err) {
			/* Something moved: look again, word by word. */
			ivm_error_destroy(err);
			w->translated = false;
			slow = true;
		} else {
			for (i = 0; i < n; i++)
				w->words[w->piece_word[i]].ok = true;
		}
	}
	if (slow) {
		err = read_one_by_one(w, mask);
		if (err)
			return err;
	}
	for (i = 0; i < w->nr; i++) {
		struct word *wd = &w->words[i * WORDS_PER_VCPU];
		struct ivm_vcpu_watch_view *v = &views[i];

		memset(v, 0, sizeof(*v));
		for (k = 0; k < WORDS_PER_VCPU && failed; k++)
			if (wd[k].wanted && !wd[k].ok && (mask & (1u << k)))
				(*failed)++;
		if (wd[W_CURRENT].ok) {
			v->current = ivm_le64(wd[W_CURRENT].value);
			v->current_ok = ivm_kernel_is_kernel_address(
				w->layout, v->current);
			if (!v->current_ok && failed)
				(*failed)++;
		}
		/* Switching: rq->curr is the task arriving, current leaving. */
		v->mid_switch = v->current_ok && wd[W_RQ_CURR].ok &&
				ivm_le64(wd[W_RQ_CURR].value) != v->current;
		if (wd[W_NVCSW].ok && wd[W_NIVCSW].ok) {
			v->idle_switches = ivm_le64(wd[W_NVCSW].value) +
					   ivm_le64(wd[W_NIVCSW].value);
			v->idle_switches_ok = true;
		}
		if (wd[W_SWITCHES].ok) {
			v->cpu_switches = ivm_le64(wd[W_SWITCHES].value);
			v->cpu_switches_ok = true;
		}
		if (wd[W_RQ_CLOCK].ok) {
			v->rq_clock = ivm_le64(wd[W_RQ_CLOCK].value);
			v->rq_clock_ok = true;
		}
		if (wd[W_IDLE_STAMP].ok) {
			v->idle_stamp = ivm_le64(wd[W_IDLE_STAMP].value);
			v->idle_stamp_ok = true;
		}
		if (w->irq_stat && (wd[W_IRQ_STAT].ok || wd[W_IRQ_SUM].ok))
			ivm_irq_stat_decode(w->irq_stat,
					    wd[W_IRQ_STAT].ok ?
					    wd[W_IRQ_STAT].value : NULL,
					    wd[W_IRQ_SUM].ok ?
					    wd[W_IRQ_SUM].value : NULL,
					    &v->irqs);
	}
	return NULL;
}

struct ivm_error *ivm_vcpu_watch_read(struct ivm_vcpu_watch *w, uint64_t now_ns,
				      struct ivm_vcpu_watch_view *views,
				      uint64_t *failed)
{
	return read_words(w, now_ns, views, failed, ALL_WORDS);
}

struct ivm_error *
ivm_vcpu_watch_read_switches(struct ivm_vcpu_watch *w, uint64_t now_ns,
			     struct ivm_vcpu_watch_view *views)
{
	return read_words(w, now_ns, views, NULL, SWITCH_WORDS);
}

const struct ivm_vcpu_watch_stats *
ivm_vcpu_watch_stats(const struct ivm_vcpu_watch *w)
{
	return &w->stats;
}
