package engine

// Shuffling, deterministic by construction: every permutation is a pure
// function of (seed, epoch, what is permuted), computed with splitmix64,
// whose outputs are fixed by its definition, so the same job gives the same
// order on every run, Go version and machine.
//
// Unit order: with shuffle.units, epoch e visits the units in a
// Fisher-Yates permutation seeded by (seed, e).
//
// Row order: with shuffle.buffer = W, the ordered row stream of an epoch is
// cut into windows of W rows and each window is permuted, seeded by (seed,
// epoch, window index). Memory stays at one window (window.go). A classic
// shuffle buffer (emit a random resident row as each new row arrives) mixes a
// little further but its state depends on every earlier row, so resuming
// at batch k would mean replaying the epoch's rows up to k through it;
// windows make a resume point cost only the rows of one window.

import "math/bits"

const (
	streamUnits = 0x756e697473 // "units"
	streamRows  = 0x726f7773   // "rows"
)

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// rng is splitmix64 as a generator.
type rng struct{ s uint64 }

func newRNG(seed, stream, epoch, index uint64) *rng {
	return &rng{s: splitmix64(splitmix64(splitmix64(seed^stream)^epoch) ^ index)}
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	x := r.s
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// below returns a uniform integer in [0, n), by Lemire's multiply-shift
// with rejection.
func (r *rng) below(n uint64) uint64 {
	for {
		hi, lo := bits.Mul64(r.next(), n)
		if lo >= n || lo >= -n%n {
			return hi
		}
	}
}

// permute fills p with a permutation of [0, len(p)).
func permute(p []int32, r *rng) {
	for i := range p {
		p[i] = int32(i)
	}
	for i := len(p) - 1; i > 0; i-- {
		j := r.below(uint64(i + 1))
		p[i], p[j] = p[j], p[i]
	}
}

// unitOrder returns the order in which epoch visits n units.
func unitOrder(n int, shuffle bool, seed, epoch uint64) []int32 {
	p := make([]int32, n)
	if !shuffle {
		for i := range p {
			p[i] = int32(i)
		}
		return p
	}
	permute(p, newRNG(seed, streamUnits, epoch, 0))
	return p
}
