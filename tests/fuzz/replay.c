// SPDX-License-Identifier: MIT
/*
 * Corpus replay driver: runs a libFuzzer target's LLVMFuzzerTestOneInput over
 * every file named on the command line, or every file in a directory, so the
 * regression corpus runs in `make check` under gcc and ASan without libFuzzer.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t cap = 0, len = 0, n;

	if (!f) {
		perror(path);
		return -1;
	}
	do {
		if (len == cap) {
			uint8_t *nbuf;

			cap = cap ? cap * 2 : 4096;
			nbuf = realloc(buf, cap);
			if (!nbuf) {
				free(buf);
				fclose(f);
				return -1;
			}
			buf = nbuf;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int i, files = 0, errors = 0;

	for (i = 1; i < argc; i++) {
		struct stat st;
		struct dirent **names;
		int n, j;

		if (stat(argv[i], &st) < 0) {
			perror(argv[i]);
			errors++;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			errors += run_file(argv[i]) < 0;
			files++;
			continue;
		}
		n = scandir(argv[i], &names, NULL, alphasort);
		if (n < 0) {
			perror(argv[i]);
			errors++;
			continue;
		}
		for (j = 0; j < n; j++) {
			char *path;

			if (names[j]->d_name[0] != '.' &&
			    asprintf(&path, "%s/%s", argv[i],
				     names[j]->d_name) >= 0) {
				errors += run_file(path) < 0;
				files++;
				free(path);
			}
			free(names[j]);
		}
		free(names);
	}
	printf("%s: replayed %d inputs, %d unreadable\n", argv[0], files,
	       errors);
	return errors ? 1 : 0;
}
