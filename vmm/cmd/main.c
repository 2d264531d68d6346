// SPDX-License-Identifier: MIT
/*
 * idlevm: a hypervisor-level profiler of idle guest vCPUs.
 */
#include <stdio.h>
#include <string.h>

#include "access/pause_guard.h"
#include "cmd/commands.h"
#include "cmd/window_run.h"
#include "base/version.h"

struct ivm_command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct ivm_command commands[] = {
	{ "doctor", ivm_cmd_doctor, "check that profile will work on this host and guest, and say how to fix what will not" },
	{ "info", ivm_cmd_info, "show the guest kernel, vCPUs and their current tasks" },
	{ "ps", ivm_cmd_ps, "list the guest's tasks, read from the host" },
	{ "maps", ivm_cmd_maps, "list a guest process's memory mappings, read from the host" },
	{ "modules", ivm_cmd_modules, "list the guest kernel's modules and where they are loaded" },
	{ "regs", ivm_cmd_regs, "show each vCPU's registers from QEMU's memory and its monitor" },
	{ "stack", ivm_cmd_stack, "print a guest thread's kernel and user stack" },
	{ "profile", ivm_cmd_profile, "sample a guest's idle transitions into a profile" },
	{ "report", ivm_cmd_report, "print the call tree of a recorded profile" },
	{ "helper", ivm_cmd_helper, "talk to the in-guest helper (hello, ping, maps)" },
};

static void usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: idlevm <command> [options]\n\ncommands:\n");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-10s %s\n", commands[i].name,
			commands[i].summary);
	fprintf(out, "\nrun 'idlevm <command> --help' for the options of one,\n"
		"'idlevm --version' for the version and git revision.\n");
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	/* Internal: the guardian of a paused guest (access/pause_guard.h). */
	if (!strcmp(argv[1], "__pause-guard"))
		return ivm_pause_guard_main(argc - 1, argv + 1);
	/* Internal: a continuous run's pprof child (cmd/window_run.h). */
	if (!strcmp(argv[1], "__window-pprof"))
		return ivm_window_pprof_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") ||
	    !strcmp(argv[1], "version")) {
		printf("idlevm %s (git %s)\n", IVM_VERSION, IVM_GIT_REV);
		return 0;
	}
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "idlevm: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
