/* A process for procmaps' tests: prints "ready", then obeys commands from
 * stdin ("dlopen PATH" prints "ok" or the error) until EOF. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(void) {
	char line[4096];
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (strncmp(line, "dlopen ", 7) == 0) {
			void *h = dlopen(line + 7, RTLD_NOW);
			printf("%s\n", h ? "ok" : dlerror());
			fflush(stdout);
		}
	}
	return 0;
}
