// SPDX-License-Identifier: MIT
/*
 * The mmap backend on this test process itself: a shared memfd mapping
 * stands for QEMU's guest RAM (as memory-backend-memfd,share=on makes it),
 * an anonymous one for the private default.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gmem/gmem.h"

#define RAM_SIZE (256 * 1024)

static uint8_t *shared_ram(void)
{
	int fd = memfd_create("ivm-unit-ram", MFD_CLOEXEC);
	uint8_t *p;

	cr_assert(fd >= 0);
	cr_assert_eq(ftruncate(fd, RAM_SIZE), 0);
	p = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	cr_assert_neq(p, MAP_FAILED);
	return p;
}

Test(gmem_mmap, reads_shared_ram_and_sees_writes)
{
	uint8_t *ram = shared_ram(), buf[16];
	struct ivm_gmem_region r[2] = {
		{ .gpa = 0, .size = RAM_SIZE / 2, .hva = (uintptr_t)ram },
		{ .gpa = 0x100000, .size = RAM_SIZE / 2,
		  .hva = (uintptr_t)ram + RAM_SIZE / 2 },
	};
	struct ivm_gmem *g;
	struct ivm_error *err;
	uint64_t v;

	memset(ram, 0x11, RAM_SIZE);
	memcpy(ram + RAM_SIZE / 2 + 8, "idlevm!", 8);
	cr_assert_null(ivm_gmem_mmap_create(getpid(), r, 2, &g));
	cr_assert_null(ivm_gmem_read_phys(g, 0x100008, buf, 8));
	cr_assert_str_eq((char *)buf, "idlevm!");
	/* The guest writes after we mapped: we see it, same pages. */
	ram[100] = 0x42;
	cr_assert_null(ivm_gmem_read_phys(g, 100, buf, 1));
	cr_assert_eq(buf[0], 0x42);
	/* Holes and the end of RAM still fault, at the first bad address. */
	err = ivm_gmem_read_u64_phys(g, RAM_SIZE / 2 - 4, &v);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_FAULT);
	cr_assert_eq(err->address, RAM_SIZE / 2);
	ivm_error_destroy(err);
	ivm_gmem_destroy(g);
	/* Our mapping outlives the gmem's. */
	cr_assert_eq(ram[100], 0x42);
	munmap(ram, RAM_SIZE);
}

Test(gmem_mmap, private_memory_is_refused)
{
	uint8_t *anon = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ivm_gmem_region r = { .gpa = 0, .size = RAM_SIZE,
				     .hva = (uintptr_t)anon };
	struct ivm_gmem *g;
	struct ivm_error *err;

	cr_assert_neq(anon, MAP_FAILED);
	err = ivm_gmem_mmap_create(getpid(), &r, 1, &g);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_NOT_FOUND, "%s", err->message);
	cr_assert(strstr(err->message, "private"), "%s", err->message);
	ivm_error_destroy(err);
	munmap(anon, RAM_SIZE);
}

Test(gmem_mmap, region_past_its_mapping_is_refused)
{
	uint8_t *ram = shared_ram();
	struct ivm_gmem_region r = { .gpa = 0, .size = 2 * RAM_SIZE,
				     .hva = (uintptr_t)ram };
	struct ivm_gmem *g;
	struct ivm_error *err;

	err = ivm_gmem_mmap_create(getpid(), &r, 1, &g);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_NOT_FOUND, "%s", err->message);
	ivm_error_destroy(err);
	munmap(ram, RAM_SIZE);
}
