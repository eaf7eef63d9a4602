/*
 * fakecuda.c: a stand-in for libcuda.so.1, for lastmile's tests on hosts
 * without a GPU. Build: gcc -shared -fPIC -o libcuda.so.1 fakecuda.c
 *
 * "Device memory" is host memory from aligned_alloc, so copies can be
 * checked byte for byte. Streams run their work at once; events record a
 * CLOCK_MONOTONIC time.
 *
 * Environment, read at every call:
 *   FAKECUDA_LOG=path    append one line per call: "name key=value ... -> code"
 *   FAKECUDA_FAIL=list   comma-separated name=code or name=code@n: the call
 *                        returns code (every time, or only its n-th time)
 *   FAKECUDA_DEVICES=n   device count (default 1; 0 makes cuInit return 100)
 * Call counts (for @n) start again from 1 whenever FAKECUDA_LOG changes.
 *
 * cuMemHostRegister checks that the range is mapped (mincore) and records
 * it; cuMemHostUnregister checks that the range is still mapped, so a log
 * line "mapped=0" there means a range was unmapped while registered.
 * cuMemcpyHtoDAsync logs pinned=1 when the source lies in a registered
 * range or in cuMemAllocHost memory.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <stdint.h>
#include <pthread.h>

/* mu guards the call counters and the range table: callers may be
 * concurrent. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
/* rmu guards the range table. */
static pthread_mutex_t rmu = PTHREAD_MUTEX_INITIALIZER;

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct { char reserved[64]; } CUipcMemHandle;
typedef struct { char reserved[64]; } CUipcEventHandle;

struct ctx { int dev; };
struct stream { unsigned flags; };
struct event { unsigned flags; double t; int recorded; };

static struct ctx ctxs[16];
static int initialized;

#define MAXR 64
static struct { char *p; size_t n; int host; } ranges[MAXR]; /* registered or pinned */

static struct { char name[64]; int count; } calls[128];

/* epoch resets the call counters whenever FAKECUDA_LOG names another
 * file, so that each test (one log each) counts its calls from 1. */
static char logpath[4096];
static void epoch(void) {
	const char *p = getenv("FAKECUDA_LOG");
	if (!p) p = "";
	if (strncmp(p, logpath, sizeof logpath) != 0) {
		memset(calls, 0, sizeof calls);
		strncpy(logpath, p, sizeof logpath - 1);
	}
}

static int count_call(const char *name) {
	epoch();
	for (int i = 0; i < 128; i++) {
		if (calls[i].name[0] == 0) { strncpy(calls[i].name, name, 63); }
		if (strcmp(calls[i].name, name) == 0) return ++calls[i].count;
	}
	return 0;
}

/* injected returns the code FAKECUDA_FAIL sets for this call, or 0. */
static CUresult injected(const char *name, int nth) {
	const char *f = getenv("FAKECUDA_FAIL");
	if (!f) return 0;
	size_t ln = strlen(name);
	while (*f) {
		const char *end = strchr(f, ',');
		size_t len = end ? (size_t)(end - f) : strlen(f);
		if (len > ln && strncmp(f, name, ln) == 0 && f[ln] == '=') {
			int code = atoi(f + ln + 1), at = 0;
			const char *a = memchr(f, '@', len);
			if (a) at = atoi(a + 1);
			if (at == 0 || at == nth) return code;
		}
		if (!end) break;
		f = end + 1;
	}
	return 0;
}

/* done logs the call with its arguments and returns its result: the
 * injected code if one is set, else r. */
static CUresult done(const char *name, CUresult r, const char *fmt, ...) {
	pthread_mutex_lock(&mu);
	int nth = count_call(name);
	CUresult inj = injected(name, nth);
	if (inj) r = inj;
	const char *path = getenv("FAKECUDA_LOG");
	if (path) {
		FILE *f = fopen(path, "a");
		if (f) {
			fprintf(f, "%s", name);
			if (fmt && *fmt) {
				va_list ap;
				va_start(ap, fmt);
				fputc(' ', f);
				vfprintf(f, fmt, ap);
				va_end(ap);
			}
			fprintf(f, " -> %d\n", r);
			fclose(f);
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

/* pre returns the injected code for a call about to run, without
 * logging: calls that would change state check it first. */
static CUresult pre(const char *name) {
	CUresult r = -1;
	pthread_mutex_lock(&mu);
	epoch();
	for (int i = 0; i < 128 && r < 0; i++)
		if (strcmp(calls[i].name, name) == 0) r = injected(name, calls[i].count + 1);
	if (r < 0) r = injected(name, 1);
	pthread_mutex_unlock(&mu);
	return r;
}

static int ndev(void) {
	const char *s = getenv("FAKECUDA_DEVICES");
	return s ? atoi(s) : 1;
}

static int mapped(const void *p, size_t n) {
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);
	size_t len = ((uintptr_t)p + n) - a;
	unsigned char *vec = malloc(len / pg + 2);
	int ok = mincore((void *)a, len, vec) == 0;
	free(vec);
	return ok;
}

static int pinned(const void *p, size_t n) {
	for (int i = 0; i < MAXR; i++)
		if (ranges[i].p && (char *)p >= ranges[i].p && (char *)p + n <= ranges[i].p + ranges[i].n) return 1;
	return 0;
}

CUresult cuInit(unsigned flags) {
	CUresult r = 0;
	if (ndev() == 0) r = 100;
	else initialized = 1;
	return done("cuInit", r, "flags=%u", flags);
}
CUresult cuDriverGetVersion(int *v) { *v = 12040; return done("cuDriverGetVersion", 0, ""); }
CUresult cuDeviceGetCount(int *n) { *n = initialized ? ndev() : 0; return done("cuDeviceGetCount", initialized ? 0 : 3, ""); }
CUresult cuDeviceGet(CUdevice *d, int i) {
	CUresult r = (i < 0 || i >= ndev()) ? 101 : 0;
	*d = i;
	return done("cuDeviceGet", r, "ordinal=%d", i);
}
CUresult cuDeviceGetName(char *s, int n, CUdevice d) { snprintf(s, n, "Fake GPU %d", d); return done("cuDeviceGetName", 0, "device=%d", d); }
CUresult cuDeviceGetAttribute(int *v, int a, CUdevice d) {
	/* 20: CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, FAKECUDA_COMPUTE_MODE or 0 (default) */
	const char *cm = getenv("FAKECUDA_COMPUTE_MODE");
	*v = a == 33 ? 0x3b + d : a == 20 ? (cm ? atoi(cm) : 0) : 1;
	return done("cuDeviceGetAttribute", 0, "attr=%d device=%d", a, d);
}
CUresult cuDeviceGetPCIBusId(char *s, int n, CUdevice d) {
	snprintf(s, n, "0000:%02x:00.0", 0x3b + d);
	return done("cuDeviceGetPCIBusId", 0, "device=%d", d);
}
CUresult cuDeviceTotalMem_v2(size_t *n, CUdevice d) { *n = (size_t)80 << 30; return done("cuDeviceTotalMem_v2", 0, "device=%d", d); }
CUresult cuDevicePrimaryCtxRetain(void **c, CUdevice d) {
	ctxs[d & 15].dev = d;
	*c = &ctxs[d & 15];
	return done("cuDevicePrimaryCtxRetain", 0, "device=%d", d);
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { return done("cuDevicePrimaryCtxRelease_v2", 0, "device=%d", d); }
CUresult cuCtxSetCurrent(void *c) { return done("cuCtxSetCurrent", 0, "ctx=%d", c ? ((struct ctx *)c)->dev : -1); }

CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
	CUresult r = pre("cuMemHostRegister_v2");
	pthread_mutex_lock(&rmu);
	int m = mapped(p, n);
	if (!r && (n == 0 || !m)) r = 1;
	if (!r && pinned(p, n)) r = 712;
	if (!r) {
		for (int i = 0; i < MAXR; i++)
			if (!ranges[i].p) { ranges[i].p = p; ranges[i].n = n; ranges[i].host = 0; break; }
	}
	pthread_mutex_unlock(&rmu);
	return done("cuMemHostRegister_v2", r, "ptr=%p bytes=%zu flags=%u align2m=%d mapped=%d", p, n, flags,
		((uintptr_t)p % (2u << 20)) == 0, m);
}
CUresult cuMemHostUnregister(void *p) {
	CUresult r = pre("cuMemHostUnregister");
	pthread_mutex_lock(&rmu);
	int found = -1;
	for (int i = 0; i < MAXR; i++)
		if (ranges[i].p == p && !ranges[i].host) found = i;
	int m = found >= 0 && mapped(p, ranges[found].n);
	if (!r && found < 0) r = 713;
	if (!r) ranges[found].p = 0;
	pthread_mutex_unlock(&rmu);
	return done("cuMemHostUnregister", r, "ptr=%p mapped=%d", p, m);
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	CUresult r = pre("cuMemAlloc_v2");
	*p = 0;
	if (!r) *p = (CUdeviceptr)(uintptr_t)aligned_alloc(256, (n + 255) & ~(size_t)255);
	return done("cuMemAlloc_v2", r, "bytes=%zu", n);
}
CUresult cuMemFree_v2(CUdeviceptr p) {
	CUresult r = pre("cuMemFree_v2");
	if (!r) free((void *)(uintptr_t)p);
	return done("cuMemFree_v2", r, "");
}
CUresult cuMemAllocHost_v2(void **p, size_t n) {
	CUresult r = pre("cuMemAllocHost_v2");
	pthread_mutex_lock(&rmu);
	*p = 0;
	if (!r) {
		*p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
		for (int i = 0; i < MAXR; i++)
			if (!ranges[i].p) { ranges[i].p = *p; ranges[i].n = n; ranges[i].host = 1; break; }
	}
	pthread_mutex_unlock(&rmu);
	return done("cuMemAllocHost_v2", r, "bytes=%zu", n);
}
CUresult cuMemFreeHost(void *p) {
	CUresult r = pre("cuMemFreeHost");
	pthread_mutex_lock(&rmu);
	if (!r) {
		for (int i = 0; i < MAXR; i++)
			if (ranges[i].p == p && ranges[i].host) ranges[i].p = 0;
		free(p);
	}
	pthread_mutex_unlock(&rmu);
	return done("cuMemFreeHost", r, "");
}
CUresult cuStreamCreate(void **s, unsigned flags) {
	struct stream *st = calloc(1, sizeof *st);
	st->flags = flags;
	*s = st;
	return done("cuStreamCreate", 0, "flags=%u", flags);
}
CUresult cuStreamDestroy_v2(void *s) { free(s); return done("cuStreamDestroy_v2", 0, ""); }
CUresult cuStreamSynchronize(void *s) { return done("cuStreamSynchronize", 0, ""); }
CUresult cuStreamWaitEvent(void *s, void *e, unsigned f) { return done("cuStreamWaitEvent", 0, ""); }
CUresult cuEventCreate(void **e, unsigned flags) {
	struct event *ev = calloc(1, sizeof *ev);
	ev->flags = flags;
	*e = ev;
	return done("cuEventCreate", 0, "flags=%u", flags);
}
CUresult cuEventDestroy_v2(void *e) { free(e); return done("cuEventDestroy_v2", 0, ""); }
static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
CUresult cuEventRecord(void *e, void *s) {
	((struct event *)e)->t = now();
	((struct event *)e)->recorded = 1;
	return done("cuEventRecord", 0, "");
}
CUresult cuEventQuery(void *e) { return done("cuEventQuery", ((struct event *)e)->recorded ? 0 : 600, ""); }
CUresult cuEventSynchronize(void *e) { return done("cuEventSynchronize", 0, ""); }
CUresult cuEventElapsedTime(float *ms, void *a, void *b) {
	*ms = (float)(((struct event *)b)->t - ((struct event *)a)->t);
	return done("cuEventElapsedTime", 0, "");
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, void *st) {
	CUresult r = pre("cuMemcpyHtoDAsync_v2");
	pthread_mutex_lock(&rmu);
	int pin = pinned(s, n);
	if (!r) memcpy((void *)(uintptr_t)d, s, n);
	pthread_mutex_unlock(&rmu);
	return done("cuMemcpyHtoDAsync_v2", r, "bytes=%zu pinned=%d", n, pin);
}
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) {
	CUresult r = pre("cuMemcpyDtoH_v2");
	if (!r) memcpy(d, (void *)(uintptr_t)s, n);
	return done("cuMemcpyDtoH_v2", r, "bytes=%zu", n);
}
CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
	memset(h, 0, sizeof *h);
	memcpy(h->reserved, "FAKEMEM", 7);
	memcpy(h->reserved + 8, &p, sizeof p);
	return done("cuIpcGetMemHandle", 0, "");
}
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h, unsigned flags) {
	CUresult r = memcmp(h.reserved, "FAKEMEM", 7) ? 1 : 0;
	memcpy(p, h.reserved + 8, sizeof *p);
	return done("cuIpcOpenMemHandle_v2", r, "flags=%u", flags);
}
CUresult cuIpcCloseMemHandle(CUdeviceptr p) { return done("cuIpcCloseMemHandle", 0, ""); }
CUresult cuIpcGetEventHandle(CUipcEventHandle *h, void *e) {
	CUresult r = (((struct event *)e)->flags & 4) ? 0 : 1; /* needs CU_EVENT_INTERPROCESS */
	memset(h, 0, sizeof *h);
	memcpy(h->reserved, "FAKEEVT", 7);
	memcpy(h->reserved + 8, &e, sizeof e);
	return done("cuIpcGetEventHandle", r, "");
}
CUresult cuIpcOpenEventHandle(void **e, CUipcEventHandle h) {
	CUresult r = memcmp(h.reserved, "FAKEEVT", 7) ? 1 : 0;
	memcpy(e, h.reserved + 8, sizeof *e);
	return done("cuIpcOpenEventHandle", r, "");
}

static const struct { CUresult r; const char *name, *text; } errs[] = {
	{0, "CUDA_SUCCESS", "no error"},
	{1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{600, "CUDA_ERROR_NOT_READY", "device not ready"},
	{700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	{712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
	{713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
};
CUresult cuGetErrorName(CUresult r, const char **s) {
	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
		if (errs[i].r == r) { *s = errs[i].name; return 0; }
	return 1;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
		if (errs[i].r == r) { *s = errs[i].text; return 0; }
	return 1;
}
