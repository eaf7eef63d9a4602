package gpu_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/gpu"
)

func TestCPUList(t *testing.T) {
	f := func(s string, want []int, wantErr bool) {
		t.Helper()
		got, err := gpu.ParseCPUList(s)
		if (err != nil) != wantErr || !slices.Equal(got, want) {
			t.Fatalf("ParseCPUList(%q) = %v, %v; want %v (error %v)", s, got, err, want, wantErr)
		}
		if !wantErr && gpu.CPUList(got) != s {
			t.Fatalf("CPUList(%v) = %q, want %q", got, gpu.CPUList(got), s)
		}
	}
	f("", nil, false)
	f("0", []int{0}, false)
	f("0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}, false)
	f("3-1", nil, true)
	f("a", nil, true)
	f("1,-2", nil, true)
}

func TestNormalizeBusID(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:3B:00.0":     "0000:3b:00.0",
		"0000:3b:00.0":         "0000:3b:00.0",
		"00000001:C1:00.0\x00": "0001:c1:00.0",
	} {
		if got := gpu.NormalizeBusID(in); got != want {
			t.Errorf("NormalizeBusID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseVisible(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"0,1", []string{"0", "1"}},
		{"2, 3", []string{"2", "3"}},
		{"GPU-5c1f,1", []string{"GPU-5c1f", "1"}},
		{"1,x,2", []string{"1"}}, // CUDA hides everything after an invalid entry
		{"-1", nil},
		{"", nil},
	} {
		if got := gpu.ParseVisible(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("ParseVisible(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestMapRanks(t *testing.T) {
	gpus := []gpu.GPU{
		{Index: 0, UUID: "GPU-aaaa-0", NUMANode: 0, CPUs: []int{0, 1}},
		{Index: 1, UUID: "GPU-bbbb-1", NUMANode: 0, CPUs: []int{0, 1}},
		{Index: 2, UUID: "GPU-cccc-2", NUMANode: 1, CPUs: []int{2, 3}},
		{Index: 3, UUID: "GPU-dddd-3", NUMANode: 1, CPUs: []int{2, 3}},
	}
	gpuOf := func(p []gpu.Placement) []int {
		out := make([]int, len(p))
		for i := range p {
			out[i] = p[i].GPU
		}
		return out
	}
	for _, tc := range []struct {
		desc    string
		n       int
		devices []string
		visible string
		gpus    []gpu.GPU
		want    []int
		err     string
	}{
		{"LOCAL_RANK", 2, nil, "", gpus, []int{0, 1}, ""},
		{"more ranks than GPUs wrap", 5, nil, "", gpus, []int{0, 1, 2, 3, 0}, ""},
		{"CUDA_VISIBLE_DEVICES", 2, nil, "2,3", gpus, []int{2, 3}, ""},
		{"visible by UUID", 1, nil, "GPU-dddd", gpus, []int{3}, ""},
		{"rank past the visible list", 3, nil, "2,3", gpus, []int{2, 3, -1}, ""},
		{"explicit map", 2, []string{"3", "GPU-aaaa"}, "1", gpus, []int{3, 0}, ""},
		{"explicit map too short", 2, []string{"3"}, "", gpus, nil, "lists 1 GPUs for 2 ranks"},
		{"explicit map names no GPU", 1, []string{"7"}, "", gpus, nil, `"7" names no GPU`},
		{"ambiguous UUID prefix", 1, []string{"GPU-"}, "", gpus, nil, "names no GPU"},
		{"no inventory", 2, nil, "", nil, []int{-1, -1}, ""},
	} {
		got, err := gpu.MapRanks(tc.n, tc.devices, tc.visible, tc.gpus)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one saying %q", tc.desc, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(gpuOf(got), tc.want) {
			t.Errorf("%s: GPUs %v, %v; want %v", tc.desc, gpuOf(got), err, tc.want)
			continue
		}
		for _, p := range got {
			if p.GPU < 0 && (p.Why == "" || p.NUMANode != -1) {
				t.Errorf("%s: unplaced rank %d: %+v, want node -1 and a reason", tc.desc, p.Rank, p)
			}
			if p.GPU >= 0 && (p.NUMANode != gpus[p.GPU].NUMANode || p.CPUs != gpu.CPUList(gpus[p.GPU].CPUs)) {
				t.Errorf("%s: rank %d placed %+v, not on its GPU's node and CPUs", tc.desc, p.Rank, p)
			}
		}
	}
}
