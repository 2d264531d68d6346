// SPDX-License-Identifier: MIT
/*
 * idlevm modules: the guest kernel's loaded modules, read from the host
 * (lsmod from outside, with each module's build-id and, with --sections,
 * where each of its ELF sections was loaded: what offline symbolization of
 * module addresses needs, and what `idlevm profile` records).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>

#include "base/text_safe.h"
#include "cmd/commands.h"
#include "kernel/guest.h"

static void modules_usage(FILE *out)
{
	fprintf(out,
"usage: idlevm modules (--domain NAME | --qmp PATH | --core FILE) [options]\n"
"\n"
"List the guest kernel's modules: name, core address, size, build-id.\n"
"\n"
IVM_GUEST_USAGE
"  -s, --sections       also each module's section addresses\n"
"  -h, --help           this help\n");
}

int ivm_cmd_modules(int argc, char **argv)
{
	static const struct option longopts[] = {
		IVM_GUEST_LONGOPTS,
		{ "sections", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ivm_guest_options opts = { 0 };
	const struct ivm_kmodules *mods;
	struct ivm_guest *g;
	struct ivm_error *err;
	bool sections = false;
	size_t i, k;
	int c, rc = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, IVM_GUEST_SHORTOPTS "sh", longopts,
				NULL)) != -1) {
		if (ivm_guest_parse_option(&opts, c, optarg))
			continue;
		if (c == 's') {
			sections = true;
			continue;
		}
		if (c == 'h') {
			modules_usage(stdout);
			return 0;
		}
		modules_usage(stderr);
		return 2;
	}
	if (optind != argc) {
		fprintf(stderr, "idlevm modules: unexpected argument '%s'\n",
			argv[optind]);
		return 2;
	}
	err = ivm_guest_check_options(&opts);
	if (err) {
		fprintf(stderr, "idlevm modules: %s\n", ivm_error_string(err));
		ivm_error_destroy(err);
		return 2;
	}
	err = ivm_guest_open(&opts, &g);
	if (err)
		return ivm_error_report(err);
	err = ivm_guest_modules(g, &mods);
	if (err) {
		ivm_guest_close(g);
		return ivm_error_report(err);
	}
	for (i = 0; i < mods->nr; i++) {
		const struct ivm_kmodule *m = &mods->mods[i];

		char name[IVM_TEXT_SAFE_SIZE(sizeof(m->name))];

		printf("%-24s 0x%016" PRIx64 " %8" PRIu64 " %s\n",
		       ivm_text_safe_n(name, sizeof(name), m->name,
				       sizeof(m->name)),
		       m->base, m->size, m->build_id[0] ? m->build_id : "-");
		for (k = 0; sections && k < m->nr_sections; k++)
			printf("  %-30s 0x%016" PRIx64 "\n",
			       m->sections[k].name, m->sections[k].addr);
	}
	if (mods->truncated) {
		fprintf(stderr, "idlevm modules: the list is truncated: %s\n",
			ivm_error_string(mods->error));
		rc = 1;
	}
	ivm_guest_close(g);
	return rc;
}
