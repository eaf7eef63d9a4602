package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// Placement is where a rank's work goes: its GPU, that GPU's NUMA node
// (where the rank's ring pages are allocated) and the CPUs near it.
type Placement struct {
	Rank int `json:"rank"`
	// GPU is the NVML index of the rank's GPU, -1 when the rank is not
	// placed (no inventory, or no GPU for it).
	GPU      int    `json:"gpu"`
	UUID     string `json:"uuid,omitempty"`
	NUMANode int    `json:"numa_node"` // -1: not bound
	CPUs     string `json:"cpus,omitempty"`
	// PCIBusID is the GPU's PCI bus id: device staging finds the CUDA
	// device by it (NVML's indexes and CUDA's ordinals may differ).
	PCIBusID string `json:"pci_bus_id,omitempty"`
	// Why says why a rank is not placed, or how it was mapped.
	Why string `json:"why,omitempty"`
}

// Unplaced returns n placements of nothing, each saying why.
func Unplaced(n int, why string) []Placement {
	p := make([]Placement, n)
	for r := range p {
		p[r] = Placement{Rank: r, GPU: -1, NUMANode: -1, Why: why}
	}
	return p
}

// MapRanks gives each of n ranks (the job's ranks on this host, rank r
// being local rank r) a GPU of gpus:
//
//   - explicit, when devices is set: devices[r] is rank r's GPU, an NVML
//     index ("3") or a UUID or its prefix ("GPU-5c1f"); an entry naming
//     no GPU is an error, as is a list of the wrong length;
//   - else through visible, the trainers' CUDA_VISIBLE_DEVICES: local rank
//     r uses its r-th visible device (torch's cuda:LOCAL_RANK); a rank
//     past the list is left unplaced, with the reason;
//   - else rank r uses GPU r mod len(gpus).
func MapRanks(n int, devices []string, visible string, gpus []GPU) ([]Placement, error) {
	if len(gpus) == 0 {
		return Unplaced(n, "no GPU in the inventory"), nil
	}
	if len(devices) > 0 && len(devices) != n {
		return nil, fmt.Errorf("gpu.devices lists %d GPUs for %d ranks: give one per rank", len(devices), n)
	}
	var vis []string
	if visible != "" {
		vis = ParseVisible(visible)
	}
	out := make([]Placement, n)
	for r := range out {
		out[r] = Placement{Rank: r, GPU: -1, NUMANode: -1}
		var (
			g   *GPU
			why string
		)
		switch {
		case len(devices) > 0:
			if g = lookup(devices[r], gpus); g == nil {
				return nil, fmt.Errorf("gpu.devices[%d] = %q names no GPU of this host (%s)", r, devices[r], names(gpus))
			}
			why = "gpu.devices"
		case visible != "":
			if r >= len(vis) {
				out[r].Why = fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q has no device for local rank %d", visible, r)
				continue
			}
			if g = lookup(vis[r], gpus); g == nil {
				out[r].Why = fmt.Sprintf("CUDA_VISIBLE_DEVICES entry %q names no GPU of this host", vis[r])
				continue
			}
			why = "CUDA_VISIBLE_DEVICES"
		default:
			g = &gpus[r%len(gpus)]
			why = "LOCAL_RANK"
		}
		if g.Err != "" {
			out[r].Why = fmt.Sprintf("GPU %d (by %s) cannot be read by NVML: %s; check it with nvidia-smi", g.Index, why, g.Err)
			continue
		}
		out[r] = Placement{Rank: r, GPU: g.Index, UUID: g.UUID, NUMANode: g.NUMANode, CPUs: CPUList(g.CPUs),
			PCIBusID: g.PCIBusID, Why: why}
	}
	return out, nil
}

// ParseVisible splits CUDA_VISIBLE_DEVICES as CUDA reads it: entries up to
// the first invalid one (CUDA hides every device after it), each an
// index or a "GPU-" UUID (prefix).
func ParseVisible(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if _, err := strconv.Atoi(e); err == nil && !strings.HasPrefix(e, "-") {
			out = append(out, e)
			continue
		}
		if strings.HasPrefix(e, "GPU-") && len(e) > 4 {
			out = append(out, e)
			continue
		}
		break
	}
	return out
}

// lookup finds the GPU an index or UUID (prefix) names.
func lookup(id string, gpus []GPU) *GPU {
	if i, err := strconv.Atoi(id); err == nil {
		for k := range gpus {
			if gpus[k].Index == i {
				return &gpus[k]
			}
		}
		return nil
	}
	var found *GPU
	for k := range gpus {
		if strings.HasPrefix(gpus[k].UUID, id) {
			if found != nil {
				return nil // ambiguous prefix
			}
			found = &gpus[k]
		}
	}
	return found
}

func names(gpus []GPU) string {
	s := make([]string, len(gpus))
	for i, g := range gpus {
		s[i] = strconv.Itoa(g.Index) + "=" + g.UUID
	}
	return strings.Join(s, ", ")
}
