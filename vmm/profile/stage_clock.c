// SPDX-License-Identifier: MIT
#include "profile/stage_clock.h"

const char *ivm_stage_name(enum ivm_stage s)
{
	static const char *const names[IVM_STAGE_NR] = {
		"other", "events", "looks", "stamps", "capture", "write",
	};

	return (unsigned int)s < IVM_STAGE_NR ? names[s] : "?";
}
