// SPDX-License-Identifier: MIT
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/caps.h"

bool ivm_caps_read(int pid, const char *key, uint64_t *ret)
{
	size_t klen = strlen(key);
	char path[64], line[256];
	bool found = false;
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	f = fopen(path, "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			*ret = strtoull(line + klen + 1, NULL, 16);
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

bool ivm_caps_effective(unsigned int cap)
{
	uint64_t eff;

	return ivm_caps_read(0, "CapEff", &eff) && cap < 64 &&
	       (eff >> cap & 1);
}

int ivm_caps_limit_raw(uint64_t keep, const char **step)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[2];
	unsigned int cap;
	uint64_t have;
	int rc;

	*step = "capget";
	if (syscall(SYS_capget, &hdr, data) < 0)
		return errno;
	have = data[0].permitted | (uint64_t)data[1].permitted << 32;
	keep &= have;
	/*
	 * The bounding set first: dropping from it takes CAP_SETPCAP, which
	 * the capset below may take away.  Without it the bounding set stays
	 * as it was, and no_new_privs is what keeps an execve from granting.
	 * Past the kernel's last capability PR_CAPBSET_READ fails.
	 */
	*step = "dropping a capability from the bounding set";
	for (cap = 0; cap < 64 && (have & IVM_CAP_BIT(IVM_CAP_SETPCAP)); cap++) {
		rc = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
		if (rc < 0)
			break;
		if (rc == 1 && !(keep >> cap & 1) &&
		    prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return errno;
	}
	/* EINVAL: a kernel before ambient capabilities (4.3), none to clear. */
	*step = "clearing the ambient capabilities";
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL)
		return errno;
	memset(data, 0, sizeof(data));
	data[0].permitted = data[0].effective = (uint32_t)keep;
	data[1].permitted = data[1].effective = (uint32_t)(keep >> 32);
	*step = "capset";
	if (syscall(SYS_capset, &hdr, data) < 0)
		return errno;
	*step = "setting no_new_privs";
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return errno;
	return 0;
}

struct ivm_error *ivm_caps_limit(uint64_t keep)
{
	const char *step;
	int rc = ivm_caps_limit_raw(keep, &step);

	return rc ? ivm_error_os(rc, "%s", step) : NULL;
}
