package ops

import (
	"fmt"
	"math"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/spec"
)

// sample: keep each row with the rate of the first rule whose when matches
// it, deterministically (docs/pipeline.md gives the exact function):
//
//	keep  ⇔  splitmix64(seed ^ keyhash(key)) < floor(rate · 2^64)
//
// keyhash is the hash of hash_mod (docs/expressions.md): XXH64, seed 0, of
// an integer key's value as 8 little-endian bytes of an int64, or of a
// string key's bytes. A rate of 1 keeps every row. Rows no rule matches are kept. The decision depends on the
// row alone, so it is the same whatever the batching, unit boundaries and
// number of workers.

type sampleRule struct {
	when *exprRef // nil: every row
	rate float64
	all  bool   // rate 1
	thr  uint64 // keep when the hash is below
}

// sampleRules is what the drop and the weight share: the rules, and which
// rule each row of the frame matches.
type sampleRules struct {
	rules []sampleRule
	def   int     // the rule without when, -1 if none
	mark  []uint8 // per row: 1 + the first rule whose when matches, 0: none
}

type sampleDrop struct {
	stepBase
	sampleRules
	key  int
	seed uint64
	all  []bool   // by mark: keep every row
	thr  []uint64 // by mark: the hash bound
	out  []int32
}

type sampleWeight struct {
	stepBase
	sampleRules
	weight []float32 // by mark
}

// maxRules bounds the rules of one sample op (a row's rule is a byte).
const maxRules = 254

// Threshold returns floor(rate·2^64), the bound a row's hash must stay
// under; ok is false for a rate of 1 or more, which keeps every row.
func threshold(rate float64) (thr uint64, ok bool) {
	if rate >= 1 {
		return 0, false
	}
	return uint64(math.Ldexp(rate, 64)), true
}

// splitmix64 is the finalizer of Vigna's SplitMix64 generator.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (c *compiler) sample(op *spec.Op) error {
	s := op.Sample
	e, why := c.groupLookup(s.Key)
	if e == nil {
		return c.errf(op, "key", "%s", why)
	}
	kv := &c.vals[e.vid]
	if !(kv.kind == column.Bytes || kv.kind == column.Fixed && kv.width == 1 && isIntDType(kv.dtype)) {
		return c.errf(op, "key", "column %q is %s; the sample key must be an integer or string column (a row or request id)", s.Key, kv.describe())
	}
	seed := c.env.Seed
	if s.Seed != nil {
		seed = *s.Seed
	}
	if len(s.Rates) > maxRules {
		return c.errf(op, "rates", "%d rules; at most %d", len(s.Rates), maxRules)
	}
	drop := &sampleDrop{stepBase: stepBase{op: op, what: s.Key, reads: []int{e.vid}}, key: e.vid, seed: seed}
	drop.def = -1
	var whenReads []int
	for k, r := range s.Rates {
		thr, below := threshold(r.Rate)
		rule := sampleRule{rate: r.Rate, thr: thr, all: !below}
		if r.When == "" {
			drop.def = k
		} else {
			x, err := c.compileExpr(r.When)
			if err != nil {
				return c.errf(op, fmt.Sprintf("rates[%d].when", k), "%v", err)
			}
			if t := x.e.Type(); t.Kind != expr.Bool {
				return c.errf(op, fmt.Sprintf("rates[%d].when", k), "want a boolean expression, %q is %s", r.When, t)
			}
			rule.when = x
			whenReads = append(whenReads, x.vids...)
		}
		drop.rules = append(drop.rules, rule)
		drop.dense = drop.dense || rule.when != nil
	}
	drop.reads = append(drop.reads, whenReads...)
	// By mark: 0 is the default rule (or keep), k+1 rule k.
	drop.all, drop.thr = []bool{true}, []uint64{0}
	weights := []float32{1}
	if drop.def >= 0 {
		d := drop.rules[drop.def]
		drop.all[0], drop.thr[0], weights[0] = d.all, d.thr, float32(1/d.rate)
	}
	for _, r := range drop.rules {
		drop.all, drop.thr = append(drop.all, r.all), append(drop.thr, r.thr)
		weights = append(weights, float32(1/r.rate))
	}
	c.addStep(drop)
	if s.Weight != "" {
		if err := c.checkName(op, "weight", s.Weight); err != nil {
			return err
		}
		if s.Weight == s.Key {
			return c.errf(op, "weight", "the weight column would replace the key %q; name it differently", s.Key)
		}
		vid := c.addValue(value{kind: column.Fixed, dtype: column.Float32, width: 1, producer: -1})
		w := &sampleWeight{stepBase: stepBase{op: op, what: s.Weight, reads: whenReads, writes: []int{vid}},
			sampleRules: sampleRules{rules: drop.rules, def: drop.def}, weight: weights}
		c.addStep(w)
		c.setColumn(s.Weight, vid, false)
	}
	return nil
}

func (r *sampleRules) clone() sampleRules {
	c := sampleRules{rules: make([]sampleRule, len(r.rules)), def: r.def}
	for i, rule := range r.rules {
		c.rules[i] = rule
		c.rules[i].when = rule.when.clone()
	}
	return c
}

// markRows sets mark[i] to 1 + the first rule whose when is true for row
// i of f, 0 when none is (the default rule, if any, applies). Each when
// runs over every row of f.
func (r *sampleRules) markRows(f *frame, op *spec.Op) error {
	r.mark = column.Grow(r.mark, f.rows)
	clear(r.mark)
	for k := range r.rules {
		w := r.rules[k].when
		if w == nil {
			continue
		}
		hits, err := w.filter(f, nil)
		if err != nil {
			return dataErr(op, "", "rates[%d].when %q: %v", k, w.src, err)
		}
		m := uint8(k + 1)
		for _, i := range hits {
			if r.mark[i] == 0 {
				r.mark[i] = m
			}
		}
	}
	return nil
}

func (s *sampleDrop) clone() step {
	return &sampleDrop{stepBase: s.stepBase, sampleRules: s.sampleRules.clone(), key: s.key, seed: s.seed, all: s.all, thr: s.thr}
}

func (s *sampleDrop) optional() bool { return false }

func (s *sampleDrop) drop(f *frame, sel []int32) ([]int32, error) {
	if err := s.markRows(f, s.op); err != nil {
		return nil, err
	}
	if sel == nil {
		s.out = iota32(s.out, f.rows)
		sel = s.out
	}
	key := f.vals[s.key]
	var n int
	switch key.DType {
	case column.Int64:
		n = sampleInts(s, key.Int64s(), sel)
	case column.Int32:
		n = sampleInts(s, key.Int32s(), sel)
	case column.Int16:
		n = sampleInts(s, key.Int16s(), sel)
	case column.Int8:
		n = sampleInts(s, key.Int8s(), sel)
	default:
		if key.Kind == column.Bytes {
			n = 0
			for _, i := range sel {
				m := s.mark[i]
				if s.all[m] || splitmix64(s.seed^expr.HashBytes(key.Data[key.Offsets[i]:key.Offsets[i+1]])) < s.thr[m] {
					sel[n] = i
					n++
				}
			}
		} else {
			n = sampleInts(s, key.Uint8s(), sel)
		}
	}
	return sel[:n], nil // sel is the previous drop's buffer or ours: ours to reuse
}

// sampleInts keeps the rows of sel that the rules keep, in place, and
// returns how many.
func sampleInts[T int8 | int16 | int32 | int64 | uint8](s *sampleDrop, keys []T, sel []int32) int {
	n := 0
	mark, all, thr, seed := s.mark, s.all, s.thr, s.seed
	for _, i := range sel {
		m := mark[i]
		if all[m] || splitmix64(seed^expr.HashInt(int64(keys[i]))) < thr[m] {
			sel[n] = i
			n++
		}
	}
	return n
}

func (s *sampleWeight) clone() step {
	return &sampleWeight{stepBase: s.stepBase, sampleRules: s.sampleRules.clone(), weight: s.weight}
}

// compute sets each row's weight to 1/rate of the first rule matching it
// (1 when none does). Every row in Apply survived the sample, so the hash
// is not needed.
func (s *sampleWeight) compute(f *frame) error {
	if err := s.markRows(f, s.op); err != nil {
		return err
	}
	dst := f.dst(s.writes[0])
	dst.Kind, dst.DType, dst.Width, dst.Len, dst.Offsets, dst.Valid = column.Fixed, column.Float32, 1, f.rows, nil, nil
	dst.Data = column.Grow(dst.Data, 4*f.rows)
	w, weight := f32s(dst.Data), s.weight
	for i, m := range s.mark[:f.rows] {
		w[i] = weight[m]
	}
	return nil
}

// iota32 returns b holding 0, 1, ..., n-1.
func iota32(b []int32, n int) []int32 {
	b = growI32(b, n)
	for i := range b {
		b[i] = int32(i)
	}
	return b
}
