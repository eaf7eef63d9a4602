package spec

import (
	"strings"
	"testing"
)

func TestGPUSection(t *testing.T) {
	base := "version: 1\ninputs: [x.parquet]\nbatch: {size: 8}\nworld_size: 2\n"
	for _, tc := range []struct {
		gpu, err string
		check    func(g GPU) bool
	}{
		{"", "", func(g GPU) bool { return g.Staging == StagingAuto && g.Placed() }},
		{"gpu: {staging: host}", "", func(g GPU) bool { return g.Staging == StagingHost }},
		{"gpu: {staging: device, devices: [1, GPU-5c1f], place: false}", "", func(g GPU) bool {
			return g.Staging == StagingDevice && len(g.Devices) == 2 && g.Devices[1] == "GPU-5c1f" && !g.Placed()
		}},
		{"gpu: {visible_devices: \"2,3\"}", "", func(g GPU) bool { return g.VisibleDevices == "2,3" }},
		{"gpu: {staging: pinned}", "gpu.staging", nil},
		{"gpu: {devices: [0, 1, 2]}", "gpu.devices", nil},
		// One per rank of a host, for a world of 2 hosts of one rank each.
		{"gpu: {devices: [3]}", "", func(g GPU) bool { return len(g.Devices) == 1 }},
		{"gpu: {devices: [0, \"\"]}", "gpu.devices[1]", nil},
		{"gpu: {stagin: host}", "stagin", nil},
	} {
		j, err := Parse("job.yaml", []byte(base+tc.gpu+"\n"))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one naming %s", tc.gpu, err, tc.err)
			}
			continue
		}
		if err != nil || !tc.check(j.GPU) {
			t.Errorf("%q: %+v, %v", tc.gpu, j.GPU, err)
		}
	}
}
