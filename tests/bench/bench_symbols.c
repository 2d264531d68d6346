// SPDX-License-Identifier: MIT
/*
 * bench_symbols: idlevm's symbolizer against eu-addr2line -f -i and
 * binutils addr2line -f -i, side by side in one run, on one list of guest
 * kernel addresses and the same vmlinux.
 *
 *   bench_symbols [--vmlinux PATH] [-n ADDRESSES] [--seed N]
 *		   [--profile FILE] [--no-binutils]
 *
 * The addresses are drawn uniformly from the vmlinux's executable
 * sections (distinct, so no tool is helped by a cache), or with --profile
 * they are the distinct kernel frames of a recorded profile (slide and
 * return-address bias removed, as `idlevm report` looks them up), and
 * written to a file that every tool reads.  For each tool:
 *   load	time to answer one address (open, index, first lookup);
 *   rate	addresses per second after load: for idlevm the time of the
 *		whole list in-process, lazy per-unit indexing included; for
 *		the others (time of the list - time of one address) from
 *		wall clock of the command, output to /dev/null.
 * idlevm's answers are also compared with eu-addr2line's (same function
 * chain, inline frames included) and the agreement is printed.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "profile_file.h"
#include "symfile.h"

#define DEFAULT_VMLINUX "/var/cache/idlevm/6.1.0-56-cloud-amd64/vmlinux"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Wall time of a shell command, or -1 if it failed. */
static double run(const char *cmd)
{
	double t = now();
	int rc = system(cmd);

	if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc))
		return -1;
	return now() - t;
}

static void tool(const char *name, const char *prog, const char *vmlinux,
		 const char *one, const char *list, size_t n, double ours_rate)
{
	char cmd[1024];
	double t1, tn, rate;

	snprintf(cmd, sizeof(cmd), "%s -f -i -e %s < %s > /dev/null 2>&1",
		 prog, vmlinux, one);
	t1 = run(cmd);
	snprintf(cmd, sizeof(cmd), "%s -f -i -e %s < %s > /dev/null 2>&1",
		 prog, vmlinux, list);
	tn = run(cmd);
	if (t1 < 0 || tn < 0) {
		printf("%-22s failed (not installed?)\n", name);
		return;
	}
	rate = tn > t1 ? (double)(n - 1) / (tn - t1) : 0;
	printf("%-22s load %8.1f ms  %10.0f addr/s   (idlevm is %.1fx)\n", name,
	       t1 * 1e3, rate, rate > 0 ? ours_rate / rate : 0);
}

/* Compare idlevm's chains with eu-addr2line -a -f -i's output. */
static void agreement(struct ivm_symfile *f, const char *vmlinux,
		      const char *list, size_t n)
{
	char cmd[1024], line[4096], eu[16][128];
	size_t neu = 0, same = 0, total = 0, inl = 0, i;
	uint64_t addr = 0;
	bool have = false, verbose = getenv("IVM_BENCH_VERBOSE");
	unsigned int shown = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "eu-addr2line -a -f -i -e %s < %s", vmlinux,
		 list);
	p = popen(cmd, "r");
	if (!p)
		return;
	for (;;) {
		bool eof = !fgets(line, sizeof(line), p);

		if (eof || !strncmp(line, "0x", 2)) {
			if (have) {
				const struct ivm_sym_location *loc =
					ivm_symfile_lookup(f, addr);
				bool ok = loc->nr_frames == neu;

				/* "??": a nameless frame, for both. */
				for (i = 0; ok && i < neu; i++)
					ok = !strcmp(loc->frames[i].function ?
						     loc->frames[i].function :
						     "??", eu[i]);
				/* Both unknown counts as agreeing. */
				if (!ok && neu == 1 && !strcmp(eu[0], "??") &&
				    !loc->nr_frames)
					ok = true;
				if (!ok && verbose && shown++ < 8) {
					printf("differs at 0x%" PRIx64 ": eu", addr);
					for (i = 0; i < neu; i++)
						printf(" %s", eu[i]);
					printf("; idlevm");
					for (i = 0; i < loc->nr_frames; i++)
						printf(" %s", loc->frames[i].function ?
						       loc->frames[i].function : "?");
					printf("\n");
				}
				same += ok;
				inl += neu > 1;
				total++;
			}
			if (eof)
				break;
			addr = strtoull(line, NULL, 16);
			have = true;
			neu = 0;
			/* The next line is a function, then a file:line. */
			while (fgets(line, sizeof(line), p)) {
				line[strcspn(line, " \n")] = '\0';
				if (neu < 16)
					snprintf(eu[neu++], 128, "%.127s", line);
				if (!fgets(line, sizeof(line), p))
					break;
				{
					int c = fgetc(p);

					ungetc(c, p);
					if (c == '0' || c == EOF)
						break;
				}
			}
		}
	}
	pclose(p);
	printf("agreement with eu-addr2line: %zu of %zu addresses (%.1f%%), "
	       "%zu with inline frames (of %zu asked)\n", same, total,
	       total ? 100.0 * (double)same / (double)total : 0, inl, n);
}

/* Distinct link-time kernel addresses of a profile's frames. */
static uint64_t *profile_addresses(const char *path, size_t *nr)
{
	struct ivm_profile_reader *r;
	struct ivm_profile_record rec;
	struct ivm_error *err;
	uint64_t slide = 0, *v = NULL;
	size_t n = 0, cap = 0, i, j;

	err = ivm_profile_reader_open(path, &r);
	if (err) {
		fprintf(stderr, "bench_symbols: %s\n", ivm_error_string(err));
		ivm_error_destroy(err);
		return NULL;
	}
	while (ivm_profile_reader_next(r, &rec)) {
		if (rec.type == IVM_RECORD_META) {
			for (i = 0; i < rec.meta.nr; i++)
				if (!strcmp(rec.meta.items[i].key, "kaslr_offset"))
					slide = strtoull(rec.meta.items[i].value,
							 NULL, 0);
			continue;
		}
		if (rec.type != IVM_RECORD_SAMPLE)
			continue;
		for (i = 0; i < rec.sample.nr_kernel; i++) {
			if (n == cap) {
				uint64_t *nv;

				cap = cap ? cap * 2 : 1024;
				nv = realloc(v, cap * sizeof(*nv));
				if (!nv)
					break;
				v = nv;
			}
			v[n++] = rec.sample.kernel_pcs[i];
		}
	}
	ivm_profile_reader_destroy(r);
	if (!n)
		return v;
	qsort(v, n, sizeof(*v), cmp_u64);
	for (i = 0, j = 0; i < n; i++)
		if (!j || v[j - 1] != v[i])
			v[j++] = v[i];
	/* Slide bias applied after dedupe: same order of unique values. */
	for (i = 0; i < j; i++)
		v[i] = v[i] - slide - 1;
	*nr = j;
	return v;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "vmlinux", required_argument, NULL, 'k' },
		{ "seed", required_argument, NULL, 's' },
		{ "no-binutils", no_argument, NULL, 'B' },
		{ "profile", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	const char *vmlinux = DEFAULT_VMLINUX;
	char one[] = "/tmp/ivm-bench-one-XXXXXX";
	char list[] = "/tmp/ivm-bench-list-XXXXXX";
	size_t n = 2000, i, frames = 0, inl = 0;
	uint64_t seed = 0x1d1e5eed, lo, hi, *addrs, hits, misses;
	struct ivm_symfile *f;
	struct ivm_sym_error *err;
	double t0, t_load, t_list, t_warm, rate;
	bool binutils = true;
	const char *profile = NULL;
	FILE *fo, *fl;
	int c, fd1, fd2;

	while ((c = getopt_long(argc, argv, "k:n:s:B", longopts, NULL)) != -1) {
		switch (c) {
		case 'k':
			vmlinux = optarg;
			break;
		case 'n':
			n = strtoul(optarg, NULL, 0);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0) | 1;
			break;
		case 'B':
			binutils = false;
			break;
		case 'p':
			profile = optarg;
			break;
		default:
			fprintf(stderr, "usage: bench_symbols [--vmlinux PATH] [-n N] [--seed N] [--no-binutils]\n");
			return 2;
		}
	}
	if (profile) {
		addrs = profile_addresses(profile, &n);
		if (!addrs)
			return 1;
	}
	if (n < 2)
		n = 2;

	/* idlevm: load = open + unit index + one lookup. */
	t0 = now();
	err = ivm_symfile_open_elf(vmlinux, &f);
	if (err) {
		fprintf(stderr, "bench_symbols: %s\n", ivm_sym_error_string(err));
		ivm_sym_error_destroy(err);
		return 1;
	}
	ivm_symfile_text_range(f, &lo, &hi);
	if (!profile)
		addrs = calloc(n, sizeof(*addrs));
	if (!addrs || hi <= lo)
		return 1;
	for (i = 0; !profile && i < n;) {
		addrs[i] = lo + xorshift(&seed) % (hi - lo);
		/* Code only: the hull also spans .rodata and data. */
		if (ivm_symfile_in_text(f, addrs[i]))
			i++;
	}
	qsort(addrs, n, sizeof(*addrs), cmp_u64);
	/* Shuffle back into a random order, as a profile's would be. */
	for (i = n - 1; i > 0; i--) {
		size_t j = xorshift(&seed) % (i + 1);
		uint64_t t = addrs[i];

		addrs[i] = addrs[j];
		addrs[j] = t;
	}
	ivm_symfile_lookup(f, addrs[0]);
	t_load = now() - t0;

	t0 = now();
	for (i = 1; i < n; i++) {
		const struct ivm_sym_location *loc =
			ivm_symfile_lookup(f, addrs[i]);

		frames += loc->nr_frames;
		inl += loc->nr_frames > 1;
	}
	t_list = now() - t0;
	t0 = now();
	for (i = 0; i < n; i++)
		ivm_symfile_lookup(f, addrs[i]);
	t_warm = now() - t0;
	ivm_symfile_cache_stats(f, &hits, &misses);

	fd1 = mkstemp(one);
	fd2 = mkstemp(list);
	if (fd1 < 0 || fd2 < 0)
		return 1;
	fo = fdopen(fd1, "w");
	fl = fdopen(fd2, "w");
	fprintf(fo, "0x%" PRIx64 "\n", addrs[0]);
	for (i = 0; i < n; i++)
		fprintf(fl, "0x%" PRIx64 "\n", addrs[i]);
	fclose(fo);
	fclose(fl);

	rate = (double)(n - 1) / t_list;
	if (profile)
		printf("bench_symbols: the %zu distinct kernel frames of %s, %s\n",
		       n, profile, vmlinux);
	else
		printf("bench_symbols: %zu distinct random addresses in the text of %s\n",
		       n, vmlinux);
	printf("%-22s load %8.1f ms  %10.0f addr/s   (%zu frames, %zu with inline frames;"
	       " cached: %.0f addr/s)\n", "idlevm symbols/", t_load * 1e3,
	       rate, frames, inl, (double)n / t_warm);
	tool("eu-addr2line -f -i", "eu-addr2line", vmlinux, one, list, n, rate);
	if (binutils)
		tool("addr2line -f -i", "addr2line", vmlinux, one, list, n, rate);
	agreement(f, vmlinux, list, n);
	unlink(one);
	unlink(list);
	free(addrs);
	ivm_symfile_destroy(f);
	return 0;
}
