// SPDX-License-Identifier: MIT
/*
 * bench_symbols: idlevm's symbolizer against eu-addr2line -f -i and
 * binutils addr2line -f -i, side by side in one run, on one list of guest
 * kernel addresses and the same vmlinux.
 *
 *   bench_symbols [--vmlinux PATH] [-n ADDRESSES] [--seed N]
 *		   [--profile FILE] [--no-binutils] [--save-addresses FILE]
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
 *		wall clock of the command, output to /dev/null;
 *		both again by CPU time (steadier on a shared machine).
 * idlevm's answers are also compared with eu-addr2line's (same function
 * chain, inline frames included, and each frame's file:line) and the
 * agreement is printed; IVM_BENCH_VERBOSE=1 shows the differences.
 * --save-addresses keeps the address list (one 0x... a line).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "profile/profile_file.h"
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

/* CPU time of this process, seconds. */
static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time (user + system) of the children waited for so far. */
static double children_cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_CHILDREN, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/*
 * Wall time of a shell command, or -1 if it failed; *cpu gets its CPU
 * time (the shell's and the tool's).
 */
static double run(const char *cmd, double *cpu)
{
	double t = now(), c = children_cpu();
	int rc = system(cmd);

	*cpu = children_cpu() - c;
	if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc))
		return -1;
	return now() - t;
}

/*
 * The rates are given twice: by wall clock, and by CPU time, which moves
 * much less when other work shares the machine (the ratio of the two
 * tools' CPU rates is the figure to quote on a busy host).
 */
static void tool(const char *name, const char *prog, const char *vmlinux,
		 const char *one, const char *list, size_t n, double ours_rate,
		 double ours_cpu_rate)
{
	char cmd[1024];
	double t1, tn, c1, cn, rate, cpu_rate;

	snprintf(cmd, sizeof(cmd), "%s -f -i -e %s < %s > /dev/null 2>&1",
		 prog, vmlinux, one);
	t1 = run(cmd, &c1);
	snprintf(cmd, sizeof(cmd), "%s -f -i -e %s < %s > /dev/null 2>&1",
		 prog, vmlinux, list);
	tn = run(cmd, &cn);
	if (t1 < 0 || tn < 0) {
		printf("%-22s failed (not installed?)\n", name);
		return;
	}
	rate = tn > t1 ? (double)(n - 1) / (tn - t1) : 0;
	cpu_rate = cn > c1 ? (double)(n - 1) / (cn - c1) : 0;
	printf("%-22s load %8.1f ms  %10.0f addr/s   (idlevm is %.1fx)\n", name,
	       t1 * 1e3, rate, rate > 0 ? ours_rate / rate : 0);
	printf("%-22s load %8.1f ms  %10.0f addr/s   (idlevm is %.1fx)  [CPU time]\n",
	       "", c1 * 1e3, cpu_rate, cpu_rate > 0 ? ours_cpu_rate / cpu_rate : 0);
}

/*
 * eu-addr2line's "FILE:LINE[:COLUMN]" (or "??:0") against a frame's file
 * and line: the column is not kept by idlevm.
 */
static bool same_position(const char *eu, const struct ivm_sym_frame *fr)
{
	char file[4096];
	const char *colon;
	unsigned long line;
	size_t fl, ol;

	if (!strcmp(eu, "??:0"))
		return !fr->file && !fr->line;
	/* FILE may hold ':' itself: LINE is the last or second-last field. */
	colon = strrchr(eu, ':');
	if (!colon)
		return false;
	line = strtoul(colon + 1, NULL, 10);
	if (colon > eu) {
		const char *prev = colon - 1;

		while (prev > eu && *prev != ':')
			prev--;
		if (*prev == ':' && prev + 1 < colon &&
		    strspn(prev + 1, "0123456789") == (size_t)(colon - prev - 1)) {
			line = strtoul(prev + 1, NULL, 10);
			colon = prev;
		}
	}
	snprintf(file, sizeof(file), "%.*s", (int)(colon - eu), eu);
	if (line != fr->line)
		return false;
	if (!fr->file)
		return !strcmp(file, "??");
	/*
	 * eu-addr2line prefixes a relative name with the unit's comp_dir
	 * (Debian's "debian/build/build_amd64_none_cloud-amd64/"); idlevm
	 * keeps the name as the line table has it.
	 */
	fl = strlen(file);
	ol = strlen(fr->file);
	return !strcmp(file, fr->file) ||
	       (fr->file[0] != '/' && fl > ol && file[fl - ol - 1] == '/' &&
		!strcmp(file + fl - ol, fr->file));
}

/*
 * Compare idlevm's answers with eu-addr2line -a -f -i's output: the same
 * frames (function names, inline chain) and, per frame, the same file:line.
 */
static void agreement(struct ivm_symfile *f, const char *vmlinux,
		      const char *list, size_t n)
{
	char cmd[1024], line[4096], eu_fn[16][128], eu_pos[16][1024];
	size_t neu = 0, same = 0, same_pos = 0, total = 0, inl = 0, i;
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
				bool ok = loc->nr_frames == neu, pos_ok;

				/* "??": a nameless frame, for both. */
				for (i = 0; ok && i < neu; i++)
					ok = !strcmp(loc->frames[i].function ?
						     loc->frames[i].function :
						     "??", eu_fn[i]);
				/* Both unknown counts as agreeing. */
				if (!ok && neu == 1 && !strcmp(eu_fn[0], "??") &&
				    !loc->nr_frames)
					ok = true;
				pos_ok = ok;
				for (i = 0; pos_ok && i < neu && i < loc->nr_frames;
				     i++)
					pos_ok = same_position(eu_pos[i],
							       &loc->frames[i]);
				if ((!ok || !pos_ok) && verbose && shown++ < 16) {
					printf("differs at 0x%" PRIx64 ":\n  eu    ",
					       addr);
					for (i = 0; i < neu; i++)
						printf(" %s@%s", eu_fn[i], eu_pos[i]);
					printf("\n  idlevm");
					for (i = 0; i < loc->nr_frames; i++)
						printf(" %s@%s:%u",
						       loc->frames[i].function ?
						       loc->frames[i].function : "?",
						       loc->frames[i].file ?
						       loc->frames[i].file : "??",
						       loc->frames[i].line);
					printf("\n");
				}
				same += ok;
				same_pos += pos_ok;
				inl += neu > 1;
				total++;
			}
			if (eof)
				break;
			addr = strtoull(line, NULL, 16);
			have = true;
			neu = 0;
			/* Then pairs of lines: a function, then file:line. */
			while (fgets(line, sizeof(line), p)) {
				line[strcspn(line, " \n")] = '\0';
				if (neu < 16)
					snprintf(eu_fn[neu], 128, "%.127s", line);
				if (!fgets(line, sizeof(line), p))
					break;
				line[strcspn(line, "\n")] = '\0';
				if (neu < 16)
					snprintf(eu_pos[neu++], 1024, "%.1023s",
						 line);
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
	printf("agreement with eu-addr2line: %zu of %zu addresses (%.1f%%) same "
	       "functions and inline chain, %zu (%.1f%%) also same file:line "
	       "in every frame; %zu with inline frames (of %zu asked)\n", same,
	       total, total ? 100.0 * (double)same / (double)total : 0,
	       same_pos, total ? 100.0 * (double)same_pos / (double)total : 0,
	       inl, n);
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
		{ "save-addresses", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	const char *vmlinux = DEFAULT_VMLINUX;
	char one[] = "/tmp/ivm-bench-one-XXXXXX";
	char list[] = "/tmp/ivm-bench-list-XXXXXX";
	size_t n = 2000, i, frames = 0, inl = 0;
	uint64_t seed = 0x1d1e5eed, lo, hi, *addrs, hits, misses;
	struct ivm_symfile *f;
	struct ivm_sym_error *err;
	double t0, t_load, t_list, t_warm, rate, c0, c_load, c_list, cpu_rate;
	bool binutils = true;
	const char *profile = NULL, *save = NULL;
	FILE *fo, *fl;
	char cmd[1024];
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
		case 'S':
			save = optarg;
			break;
		default:
			fprintf(stderr, "usage: bench_symbols [--vmlinux PATH] [-n N] [--seed N] [--profile FILE] [--no-binutils] [--save-addresses FILE]\n");
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
	c0 = cpu_now();
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
	c_load = cpu_now() - c0;

	t0 = now();
	c0 = cpu_now();
	for (i = 1; i < n; i++) {
		const struct ivm_sym_location *loc =
			ivm_symfile_lookup(f, addrs[i]);

		frames += loc->nr_frames;
		inl += loc->nr_frames > 1;
	}
	t_list = now() - t0;
	c_list = cpu_now() - c0;
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
	if (save) {
		double cpu;

		snprintf(cmd, sizeof(cmd), "cp %s %s", list, save);
		if (run(cmd, &cpu) < 0)
			fprintf(stderr, "bench_symbols: cannot write %s\n", save);
	}

	rate = (double)(n - 1) / t_list;
	cpu_rate = c_list > 0 ? (double)(n - 1) / c_list : 0;
	if (profile)
		printf("bench_symbols: the %zu distinct kernel frames of %s, %s\n",
		       n, profile, vmlinux);
	else
		printf("bench_symbols: %zu distinct random addresses in the text of %s\n",
		       n, vmlinux);
	printf("%-22s load %8.1f ms  %10.0f addr/s   (%zu frames, %zu with inline frames;"
	       " cached: %.0f addr/s)\n", "idlevm symbols/", t_load * 1e3,
	       rate, frames, inl, (double)n / t_warm);
	printf("%-22s load %8.1f ms  %10.0f addr/s   [CPU time]\n", "",
	       c_load * 1e3, cpu_rate);
	tool("eu-addr2line -f -i", "eu-addr2line", vmlinux, one, list, n, rate,
	     cpu_rate);
	if (binutils)
		tool("addr2line -f -i", "addr2line", vmlinux, one, list, n,
		     rate, cpu_rate);
	agreement(f, vmlinux, list, n);
	unlink(one);
	unlink(list);
	free(addrs);
	ivm_symfile_destroy(f);
	return 0;
}
