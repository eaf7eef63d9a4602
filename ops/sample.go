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

type sampleDrop struct {
	stepBase
	key   int
	seed  uint64
	rules []sampleRule
	dec   []uint8 // per row: 0 undecided, 1 keep, 2 drop
	und   []int32 // rows no rule has matched yet
	out   []int32
}

type sampleWeight struct {
	stepBase
	rules []sampleRule
	mark  []uint8
	und   []int32
}

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
	e, why := c.lookup(s.Key)
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
	drop := &sampleDrop{stepBase: stepBase{op: op, what: s.Key, reads: []int{e.vid}}, key: e.vid, seed: seed}
	var whenReads []int
	for k, r := range s.Rates {
		rule := sampleRule{rate: r.Rate}
		rule.thr, rule.all = threshold(r.Rate)
		rule.all = !rule.all
		if r.When != "" {
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
	c.addStep(drop)
	if s.Weight != "" {
		if s.Weight == s.Key {
			return c.errf(op, "weight", "the weight column would replace the key %q; name it differently", s.Key)
		}
		vid := c.addValue(value{kind: column.Fixed, dtype: column.Float32, width: 1, producer: -1})
		w := &sampleWeight{stepBase: stepBase{op: op, what: s.Weight, reads: whenReads, writes: []int{vid}}, rules: drop.rules}
		c.addStep(w)
		c.setColumn(s.Weight, vid, false)
	}
	return nil
}

func cloneRules(rules []sampleRule) []sampleRule {
	out := make([]sampleRule, len(rules))
	for i, r := range rules {
		out[i] = r
		out[i].when = r.when.clone()
	}
	return out
}

func (s *sampleDrop) clone() step {
	c := &sampleDrop{stepBase: s.stepBase, key: s.key, seed: s.seed, rules: cloneRules(s.rules)}
	return c
}

func (s *sampleDrop) optional() bool { return false }

func (s *sampleDrop) drop(f *frame, sel []int32) ([]int32, error) {
	rows := sel
	if rows == nil {
		s.out = iota32(s.out, f.rows)
		rows = s.out
	}
	s.dec = column.Grow(s.dec, f.rows)
	clear(s.dec)
	s.und = append(s.und[:0], rows...)
	key := f.vals[s.key]
	for k := range s.rules {
		r := &s.rules[k]
		matched := s.und
		if r.when != nil {
			var err error
			if matched, err = r.when.filter(f, s.und); err != nil {
				return nil, dataErr(s.op, "", "rates[%d].when %q: %v", k, r.when.src, err)
			}
		}
		s.decide(key, matched, r)
		if r.when == nil {
			break
		}
		n := 0
		for _, i := range s.und {
			if s.dec[i] == 0 {
				s.und[n] = i
				n++
			}
		}
		if s.und = s.und[:n]; n == 0 {
			break
		}
	}
	n := 0
	for _, i := range rows {
		if s.dec[i] != 2 {
			rows[n] = i // rows is sel (ours to reuse) or s.out
			n++
		}
	}
	return rows[:n], nil
}

// decide sets the fate of the rows matched by rule r.
func (s *sampleDrop) decide(key *column.Column, matched []int32, r *sampleRule) {
	dec := s.dec
	if r.all {
		for _, i := range matched {
			dec[i] = 1
		}
		return
	}
	seed, thr := s.seed, r.thr
	verdict := func(h uint64) uint8 {
		if splitmix64(seed^h) < thr {
			return 1
		}
		return 2
	}
	switch {
	case key.Kind == column.Bytes:
		for _, i := range matched {
			dec[i] = verdict(expr.HashBytes(key.Data[key.Offsets[i]:key.Offsets[i+1]]))
		}
	case key.DType == column.Int64:
		ks := key.Int64s()
		for _, i := range matched {
			dec[i] = verdict(expr.HashInt(ks[i]))
		}
	case key.DType == column.Int32:
		ks := key.Int32s()
		for _, i := range matched {
			dec[i] = verdict(expr.HashInt(int64(ks[i])))
		}
	case key.DType == column.Int16:
		ks := key.Int16s()
		for _, i := range matched {
			dec[i] = verdict(expr.HashInt(int64(ks[i])))
		}
	case key.DType == column.Int8:
		ks := key.Int8s()
		for _, i := range matched {
			dec[i] = verdict(expr.HashInt(int64(ks[i])))
		}
	default: // Uint8
		ks := key.Uint8s()
		for _, i := range matched {
			dec[i] = verdict(expr.HashInt(int64(ks[i])))
		}
	}
}

func (s *sampleWeight) clone() step {
	return &sampleWeight{stepBase: s.stepBase, rules: cloneRules(s.rules)}
}

// compute sets each row's weight to 1/rate of the first rule matching it
// (1 when none does). Every row in Apply survived the sample, so the hash
// is not needed.
func (s *sampleWeight) compute(f *frame) error {
	dst := f.dst(s.writes[0])
	dst.Kind, dst.DType, dst.Width, dst.Len, dst.Offsets, dst.Valid = column.Fixed, column.Float32, 1, f.rows, nil, nil
	dst.Data = column.Grow(dst.Data, 4*f.rows)
	w := f32s(dst.Data)
	for i := range w {
		w[i] = 1
	}
	s.mark = column.Grow(s.mark, f.rows)
	clear(s.mark)
	s.und = iota32(s.und, f.rows)
	for k := range s.rules {
		r := &s.rules[k]
		matched := s.und
		if r.when != nil {
			var err error
			if matched, err = r.when.filter(f, s.und); err != nil {
				return dataErr(s.op, "", "rates[%d].when %q: %v", k, r.when.src, err)
			}
		}
		wt := float32(1 / r.rate)
		for _, i := range matched {
			w[i] = wt
			s.mark[i] = 1
		}
		if r.when == nil {
			break
		}
		n := 0
		for _, i := range s.und {
			if s.mark[i] == 0 {
				s.und[n] = i
				n++
			}
		}
		if s.und = s.und[:n]; n == 0 {
			break
		}
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
