package datagen

import (
	"math"
	"sync"
)

// How values are made
//
// Each column has a 64-bit key, mix64(seed, column id). A row's value is
// drawn from h = mix64(key + (row_id+1)*golden), the row_id-th output of a
// splitmix64 stream seeded with the key; sequence element k of that row is
// mix64(h + (k+1)*golden). Null decisions use a second key per nullable
// column, so whether a row is null does not change its value.
//
// Skewed ids use the inverse CDF of a continuous power law (a close cousin of
// zipf with exponent s) over ranks [0, n), then scramble the rank with
// rank*p+c mod n (p a prime larger than any n) so that the popular ids are
// spread over the id space rather than being 0, 1, 2... Sequence elements,
// which are 80% of all values, use the cheaper rank = n*u^3 (density
// proportional to rank^(-2/3)).
//
// Per value, only integer arithmetic and the IEEE-exact float operations
// (+, -, *, /, sqrt, conversions) are used, with explicit conversions between
// a multiplication and an addition so no platform fuses them into an FMA. So
// values are the same on every platform. File bytes are promised identical
// only for one platform and one parquet-go version: compressors may pick
// different matches in their assembly and pure-Go versions.

const golden = 0x9e3779b97f4a7c15

// mix64 is the splitmix64 finalizer: a bijection on uint64 that mixes well.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Column ids that keys derive from. They are part of the output format: do
// not renumber them.
const (
	idUserID    = 1
	idItemID    = 2
	idLabel     = 3
	idQuery     = 4
	idDenseOpt  = 5
	idCatOpt    = 6
	idSeqOpt    = 7
	idQueryOpt  = 8
	idDense     = 1 << 16 // + j
	idCat       = 2 << 16 // + j
	idSeq       = 3 << 16 // + j
	idNullFlag  = 1 << 32 // | id of a nullable column: its null decisions
	idEmptyFlag = 2 << 32 // | idSeqOpt: forced-empty decisions
)

func columnKey(seed, id uint64) uint64 { return mix64(mix64(seed) ^ mix64(id*golden+1)) }

func rowHash(key uint64, row int64) uint64 { return mix64(key + uint64(row+1)*golden) }

func elemHash(h uint64, k int) uint64 { return mix64(h + uint64(k+1)*golden) }

// unit maps a hash to a float64 in [0, 1).
func unit(h uint64) float64 { return float64(h>>11) * 0x1p-53 }

// Cardinalities and exponents. Part of the output format.
const (
	Users       = 1_000_000  // user_id is in [0, Users)
	Items       = 10_000_000 // item_id is in [0, Items)
	Queries     = 4096       // number of distinct query ids (some share a string)
	CatOptCard  = 1000       // cat_opt is in [0, CatOptCard)
	LabelRate   = 0.05       // P(label == 1)
	scrambleMul = 1_000_000_007
	scrambleAdd = 12_345_677
	// DictMaxCardinality is the largest cardinality of a cat_j column that
	// is dictionary encoded; more distinct values would make a dictionary
	// page bigger than the 1 MiB at which parquet-mr and pyarrow give up on
	// dictionaries.
	DictMaxCardinality = 100_000
)

// catCards are the cardinalities of cat_j, cycling over j.
var catCards = [...]int64{100, 10_000_000, 1000, 1_000_000, 10_000, 3_000_000, 100_000, 500}

// seqCards are the cardinalities of seq_j's elements, cycling over j:
// seq_0 is item history, the others coarser histories.
var seqCards = [...]int64{Items, 50_000, 1_000_000, 1000}

// CatCardinality returns the number of distinct values cat_j can take:
// cat_j is in [0, CatCardinality(j)).
func CatCardinality(j int) int64 { return catCards[j%len(catCards)] }

// SeqCardinality returns the cardinality of seq_j's elements.
func SeqCardinality(j int) int64 { return seqCards[j%len(seqCards)] }

func scramble(rank, n int64) int64 {
	return int64((uint64(rank)*scrambleMul + scrambleAdd) % uint64(n))
}

// powerLaw draws ranks in [0, n) with P(rank) roughly proportional to
// (rank+1)^-s, s = 1 + 1/k: the inverse CDF of a density x^-s on [1, n+1),
// x = (1 + u*a)^-k with a = (n+1)^(-1/k) - 1. An integer k keeps the power
// to multiplications, which are exact IEEE operations on every platform
// and cheaper than math.Pow. a is computed once with math.Pow and rounded
// to float32 precision so that a last-bit difference between platforms'
// math.Pow cannot change it.
type powerLaw struct {
	n int64
	a float64
	k int
}

func newPowerLaw(n int64, k int) powerLaw {
	a := math.Pow(float64(n+1), -1/float64(k)) - 1
	return powerLaw{n: n, a: float64(float32(a)), k: k}
}

func (p powerLaw) id(h uint64) int64 {
	y := 1 + float64(unit(h)*p.a) // in ((n+1)^(-1/k), 1]
	x := 1.0                      // y^k by squaring
	for k := p.k; ; {
		if k&1 != 0 {
			x *= y
		}
		if k >>= 1; k == 0 {
			break
		}
		y *= y
	}
	r := int64(1/x) - 1
	r = max(0, min(r, p.n-1))
	return scramble(r, p.n)
}

// cubeID draws an id in [0, n) with density proportional to rank^(-2/3).
func cubeID(h uint64, n int64) int64 {
	u := unit(h)
	r := int64(float64(u*u*u) * float64(n))
	return scramble(min(r, n-1), n)
}

// Power-law exponents are s = 1 + 1/k: 1.1 for users, categories and
// queries, 1.05 for items.
const (
	userK  = 10
	itemK  = 20
	catK   = 10
	queryK = 10
)

var sqrt3 = math.Sqrt(3)

// normal maps a hash to an approximately N(0, 1) float32: the sum of four
// 16-bit uniforms (Irwin-Hall), centred and scaled to unit variance.
func normal(h uint64) float32 {
	s := float64(h&0xffff+h>>16&0xffff+h>>32&0xffff+h>>48) + 2 // +2: centre the four half-steps
	return float32((float64(s*0x1p-16) - 2) * sqrt3)
}

var denseScales = [...]float64{1, 10, 100, 1000}

// denseValue: even j ~ N(0,1); odd j >= 0, 20% exact zeros, a cubed uniform
// scaled by 1, 10, 100 or 1000.
func denseValue(h uint64, j int) float32 {
	if j%2 == 0 {
		return normal(h)
	}
	if h&0xff < 51 {
		return 0
	}
	u := unit(h) // top 53 bits: independent of the zero decision above
	return float32(float64(u*u*u) * denseScales[(j/2)%len(denseScales)])
}

// seqLen draws a length from a Lomax (Pareto II) distribution of shape 2
// and scale lambda, rounded and clamped to maxLen: many short sequences
// (the median is 0.41*lambda), a heavy tail of long ones, and a spike at
// maxLen from the clamp, as truncated histories have. seqScale picks lambda
// so that the clamped mean is the configured mean.
func seqLen(h uint64, lambda float64, maxLen int) int {
	if lambda <= 0 || maxLen <= 0 {
		return 0
	}
	if math.IsInf(lambda, 1) {
		return maxLen
	}
	u := 1 - unit(h) // (0, 1]
	x := float64(lambda*(1/math.Sqrt(u)-1)) + 0.5
	if x >= float64(maxLen) {
		return maxLen
	}
	return int(x)
}

// seqScale returns the Lomax scale whose mean after clamping to maxLen is
// mean: for shape 2, E[min(X, M)] = lambda*M/(lambda+M). +Inf when
// mean >= maxLen: every sequence is maxLen long.
func seqScale(mean, maxLen int) float64 {
	if mean <= 0 || maxLen <= 0 {
		return 0
	}
	if mean >= maxLen {
		return math.Inf(1)
	}
	m, M := float64(mean), float64(maxLen)
	return m * M / (M - m)
}

// queryStrings is the table of query strings, independent of the seed.
var queryStrings = sync.OnceValue(func() []string {
	words := [...]string{
		"red", "blue", "black", "white", "green", "cheap", "best", "new", "used", "kids",
		"men", "women", "running", "shoes", "jacket", "dress", "phone", "case", "charger", "laptop",
		"bag", "watch", "headphones", "wireless", "usb", "c", "cable", "coffee", "maker", "table",
		"chair", "lamp", "desk", "sofa", "bed", "pillow", "towel", "knife", "pan", "pot",
		"garden", "hose", "tent", "bike", "helmet", "ball", "toy", "lego", "book", "novel",
		"2024", "xl", "pro", "mini", "max", "size", "10", "42", "near", "me",
		"café", "größe", "東京", "niño",
	}
	qs := make([]string, Queries)
	buf := make([]byte, 0, 64)
	for i := range qs {
		h := mix64(uint64(i)*golden + 0x71756572)
		n := 1 + int(h%4) // 1..4 words
		buf = buf[:0]
		for w := range n {
			if w > 0 {
				buf = append(buf, ' ')
			}
			buf = append(buf, words[elemHash(h, w)%uint64(len(words))]...)
		}
		qs[i] = string(buf)
	}
	return qs
})

// QueryString returns the string of query id q, q in [0, Queries).
func QueryString(q int) string { return queryStrings()[q] }

// A Generator computes the values of one Config. Its methods are pure
// functions of (Config, row id) and safe for concurrent use. Values do not
// depend on Files, RowGroupRows, Compression, DataPageVersion, PageBytes,
// PageRows or Prefix.
//
// A Generator does not validate its Config; give it one that Validate
// accepts.
type Generator struct {
	cfg Config

	kUser, kItem, kLabel, kQuery uint64
	kDense                       []uint64
	kCat                         []uint64
	kSeq                         []uint64

	kDenseOpt, kCatOpt, kSeqOpt, kQueryOpt uint64
	nDenseOpt, nCatOpt, nSeqOpt, nQueryOpt uint64 // null decision keys
	kSeqOptEmpty                           uint64
	user, item, query, catOpt              powerLaw
	cat                                    []powerLaw
	seqScale                               float64 // Lomax scale of sequence lengths
	nullThreshold                          uint64  // a row is null when its null hash < nullThreshold
	nullAll                                bool    // NullFraction == 1
	queries                                []string
}

// NewGenerator returns a Generator for cfg.
func NewGenerator(cfg Config) *Generator {
	s := cfg.Seed
	g := &Generator{
		cfg:          cfg,
		kUser:        columnKey(s, idUserID),
		kItem:        columnKey(s, idItemID),
		kLabel:       columnKey(s, idLabel),
		kQuery:       columnKey(s, idQuery),
		kDenseOpt:    columnKey(s, idDenseOpt),
		kCatOpt:      columnKey(s, idCatOpt),
		kSeqOpt:      columnKey(s, idSeqOpt),
		kQueryOpt:    columnKey(s, idQueryOpt),
		nDenseOpt:    columnKey(s, idNullFlag|idDenseOpt),
		nCatOpt:      columnKey(s, idNullFlag|idCatOpt),
		nSeqOpt:      columnKey(s, idNullFlag|idSeqOpt),
		nQueryOpt:    columnKey(s, idNullFlag|idQueryOpt),
		kSeqOptEmpty: columnKey(s, idEmptyFlag|idSeqOpt),
		user:         newPowerLaw(Users, userK),
		item:         newPowerLaw(Items, itemK),
		query:        newPowerLaw(Queries, queryK),
		catOpt:       newPowerLaw(CatOptCard, catK),
		seqScale:     seqScale(cfg.SeqMeanLen, cfg.SeqMaxLen),
		queries:      queryStrings(),
	}
	for j := range max(cfg.Dense, 0) {
		g.kDense = append(g.kDense, columnKey(s, idDense+uint64(j)))
	}
	for j := range max(cfg.Cats, 0) {
		g.kCat = append(g.kCat, columnKey(s, idCat+uint64(j)))
		g.cat = append(g.cat, newPowerLaw(CatCardinality(j), catK))
	}
	for j := range max(cfg.Seqs, 0) {
		g.kSeq = append(g.kSeq, columnKey(s, idSeq+uint64(j)))
	}
	switch f := cfg.NullFraction; {
	case f >= 1:
		g.nullAll = true
	case f > 0:
		g.nullThreshold = uint64(f * 0x1p64)
	}
	return g
}

// Config returns the Config g was made for.
func (g *Generator) Config() Config { return g.cfg }

func (g *Generator) isNull(key uint64, row int64) bool {
	return g.nullAll || rowHash(key, row) < g.nullThreshold
}

// UserID returns user_id of row: zipf-like over [0, Users).
func (g *Generator) UserID(row int64) int64 { return g.user.id(rowHash(g.kUser, row)) }

// ItemID returns item_id of row: zipf-like over [0, Items).
func (g *Generator) ItemID(row int64) int64 { return g.item.id(rowHash(g.kItem, row)) }

// Label returns label of row: 1 with probability LabelRate, else 0.
func (g *Generator) Label(row int64) int32 {
	if unit(rowHash(g.kLabel, row)) < LabelRate {
		return 1
	}
	return 0
}

// Dense returns dense_j of row.
func (g *Generator) Dense(row int64, j int) float32 {
	return denseValue(rowHash(g.kDense[j], row), j)
}

// Cat returns cat_j of row: zipf-like over [0, CatCardinality(j)).
func (g *Generator) Cat(row int64, j int) int64 { return g.cat[j].id(rowHash(g.kCat[j], row)) }

// SeqLen returns the length of seq_j in row.
func (g *Generator) SeqLen(row int64, j int) int {
	return seqLen(rowHash(g.kSeq[j], row), g.seqScale, g.cfg.SeqMaxLen)
}

// AppendSeq appends the elements of seq_j in row to dst and returns it.
func (g *Generator) AppendSeq(dst []int64, row int64, j int) []int64 {
	h := rowHash(g.kSeq[j], row)
	n, card := seqLen(h, g.seqScale, g.cfg.SeqMaxLen), SeqCardinality(j)
	for k := range n {
		dst = append(dst, cubeID(elemHash(h, k), card))
	}
	return dst
}

func (g *Generator) queryID(row int64) int { return int(g.query.id(rowHash(g.kQuery, row))) }

// Query returns query of row: one of the Queries strings, zipf-like.
func (g *Generator) Query(row int64) string { return g.queries[g.queryID(row)] }

// DenseOpt returns dense_opt of row and whether it is valid (not null).
// A null row returns 0, false.
func (g *Generator) DenseOpt(row int64) (float32, bool) {
	if g.isNull(g.nDenseOpt, row) {
		return 0, false
	}
	return normal(rowHash(g.kDenseOpt, row)), true
}

// CatOpt returns cat_opt of row, zipf-like over [0, CatOptCard), and
// whether it is valid. A null row returns 0, false.
func (g *Generator) CatOpt(row int64) (int64, bool) {
	if g.isNull(g.nCatOpt, row) {
		return 0, false
	}
	return g.catOpt.id(rowHash(g.kCatOpt, row)), true
}

// seqOptLen returns seq_opt's length in row, or -1 for a null list. Of the
// valid rows, a NullFraction share is forced empty on top of the empty lists
// the length distribution makes, so empty and null lists both appear.
func (g *Generator) seqOptLen(row int64) (h uint64, n int) {
	if g.isNull(g.nSeqOpt, row) {
		return 0, -1
	}
	if g.isNull(g.kSeqOptEmpty, row) {
		return 0, 0
	}
	h = rowHash(g.kSeqOpt, row)
	return h, seqLen(h, g.seqScale, g.cfg.SeqMaxLen)
}

// AppendSeqOpt appends the elements of seq_opt in row to dst. It returns dst
// and whether the list is valid: false for a null list, true for an empty
// one.
func (g *Generator) AppendSeqOpt(dst []int64, row int64) ([]int64, bool) {
	h, n := g.seqOptLen(row)
	for k := range n {
		dst = append(dst, cubeID(elemHash(h, k), Items))
	}
	return dst, n >= 0
}

// QueryOpt returns query_opt of row and whether it is valid. A null row
// returns "", false.
func (g *Generator) QueryOpt(row int64) (string, bool) {
	if g.isNull(g.nQueryOpt, row) {
		return "", false
	}
	return g.queries[g.query.id(rowHash(g.kQueryOpt, row))], true
}

// Row holds the expected values of one row. Nullable fields are set only
// when Config.Nullable; their Valid flag is false for a null, and the value
// is then the zero value (SeqOpt is empty).
type Row struct {
	RowID  int64
	UserID int64
	ItemID int64
	Label  int32
	Dense  []float32 // dense_0..dense_{Dense-1}
	Cats   []int64   // cat_0..cat_{Cats-1}
	Seqs   [][]int64 // seq_0..seq_{Seqs-1}
	Query  string

	DenseOpt      float32
	DenseOptValid bool
	CatOpt        int64
	CatOptValid   bool
	SeqOpt        []int64
	SeqOptValid   bool
	QueryOpt      string
	QueryOptValid bool
}

// Fill sets r to the values of row, reusing r's slices. It does not
// allocate once r's slices have grown to fit.
func (g *Generator) Fill(row int64, r *Row) {
	r.RowID = row
	r.UserID = g.UserID(row)
	r.ItemID = g.ItemID(row)
	r.Label = g.Label(row)
	r.Dense = r.Dense[:0]
	for j := range g.kDense {
		r.Dense = append(r.Dense, g.Dense(row, j))
	}
	r.Cats = r.Cats[:0]
	for j := range g.kCat {
		r.Cats = append(r.Cats, g.Cat(row, j))
	}
	if cap(r.Seqs) < len(g.kSeq) {
		r.Seqs = append(r.Seqs[:cap(r.Seqs)], make([][]int64, len(g.kSeq)-cap(r.Seqs))...)
	}
	r.Seqs = r.Seqs[:len(g.kSeq)]
	for j := range g.kSeq {
		r.Seqs[j] = g.AppendSeq(r.Seqs[j][:0], row, j)
	}
	r.Query = g.Query(row)
	r.DenseOpt, r.DenseOptValid = 0, false
	r.CatOpt, r.CatOptValid = 0, false
	r.SeqOpt, r.SeqOptValid = r.SeqOpt[:0], false
	r.QueryOpt, r.QueryOptValid = "", false
	if g.cfg.Nullable {
		r.DenseOpt, r.DenseOptValid = g.DenseOpt(row)
		r.CatOpt, r.CatOptValid = g.CatOpt(row)
		r.SeqOpt, r.SeqOptValid = g.AppendSeqOpt(r.SeqOpt, row)
		r.QueryOpt, r.QueryOptValid = g.QueryOpt(row)
	}
}

// Expected returns the values of row rowID under cfg. It builds a Generator
// each call; loops over many rows should use NewGenerator and Fill.
func Expected(cfg Config, rowID int64) Row {
	var r Row
	NewGenerator(cfg).Fill(rowID, &r)
	return r
}
