package decode

import "encoding/binary"

// snappyPrefix decodes the start of a snappy block, resumably, without
// decoding the rest. A v1 data page is compressed whole, its levels in
// front of its values; decoding just the levels tells where the values
// start, so that the whole page can then be decompressed with the values
// landing in their final place in the column (see pageValues.fixedAt),
// instead of into scratch and copied.
//
// It understands standard snappy only; on anything else (s2 extensions,
// corrupt input) it reports failure and the caller takes the general path,
// which reports any real corruption.
type snappyPrefix struct {
	src []byte
	s   int    // next tag in src
	out []byte // decoded prefix
	// A literal or copy cut short by the last fill.
	litLeft, copyLeft, copyOff int
}

// init reads the block's preamble and checks it promises want bytes.
func (p *snappyPrefix) init(src []byte, want int, buf []byte) bool {
	n, k := binary.Uvarint(src)
	if k <= 0 || n != uint64(want) {
		return false
	}
	*p = snappyPrefix{src: src, s: k, out: buf[:0]}
	return true
}

// fill decodes until the prefix holds at least until bytes.
func (p *snappyPrefix) fill(until int) bool {
	for len(p.out) < until {
		if p.litLeft > 0 {
			m := min(p.litLeft, until-len(p.out))
			p.out = append(p.out, p.src[p.s:p.s+m]...)
			p.s += m
			p.litLeft -= m
			continue
		}
		if p.copyLeft > 0 {
			for p.copyLeft > 0 && len(p.out) < until {
				p.out = append(p.out, p.out[len(p.out)-p.copyOff])
				p.copyLeft--
			}
			continue
		}
		src, s := p.src, p.s
		if s >= len(src) {
			return false
		}
		t := src[s]
		switch t & 3 {
		case 0:
			x := int(t >> 2)
			switch {
			case x < 60:
				s++
			case x == 60 && s+1 < len(src):
				x = int(src[s+1])
				s += 2
			case x == 61 && s+2 < len(src):
				x = int(binary.LittleEndian.Uint16(src[s+1:]))
				s += 3
			case x == 62 && s+3 < len(src):
				x = int(src[s+1]) | int(src[s+2])<<8 | int(src[s+3])<<16
				s += 4
			case x == 63 && s+4 < len(src):
				x = int(binary.LittleEndian.Uint32(src[s+1:]))
				s += 5
			default:
				return false
			}
			if x+1 <= 0 || x+1 > len(src)-s {
				return false
			}
			p.s, p.litLeft = s, x+1
		case 1:
			if s+1 >= len(src) {
				return false
			}
			p.copyLeft = 4 + int(t>>2)&7
			p.copyOff = int(t&0xe0)<<3 | int(src[s+1])
			p.s = s + 2
		case 2:
			if s+2 >= len(src) {
				return false
			}
			p.copyLeft = 1 + int(t>>2)
			p.copyOff = int(binary.LittleEndian.Uint16(src[s+1:]))
			p.s = s + 3
		case 3:
			if s+4 >= len(src) {
				return false
			}
			p.copyLeft = 1 + int(t>>2)
			p.copyOff = int(binary.LittleEndian.Uint32(src[s+1:]))
			p.s = s + 5
		}
		if p.copyLeft > 0 && (p.copyOff <= 0 || p.copyOff > len(p.out)) {
			return false
		}
	}
	return true
}

// v1SnappyLevels decodes the level sections at the front of a
// snappy-compressed v1 page into d.pfx and returns them with the length
// of the levels part (where the values start). ok is false when the page
// must take the general path.
func (d *Decoder) v1SnappyLevels(f *Field, h *pageHeader, body []byte) (lead int, rep, def []byte, ok bool) {
	var p snappyPrefix
	if !p.init(body, int(h.uncompressed), d.pfx) {
		return 0, nil, nil, false
	}
	U := int(h.uncompressed)
	var sections [2][2]int // [rep, def] → [start, len]
	k := 0
	for i, has := range [2]bool{f.MaxRep > 0, f.MaxDef > 0} {
		if !has {
			continue
		}
		enc := h.repEncoding
		if i == 1 {
			enc = h.defEncoding
		}
		if enc != encRLE || k+4 > U || !p.fill(k+4) {
			return 0, nil, nil, false
		}
		l := int(binary.LittleEndian.Uint32(p.out[k:]))
		k += 4
		if l < 0 || l > U-k || !p.fill(k+l) {
			return 0, nil, nil, false
		}
		sections[i] = [2]int{k, l}
		k += l
	}
	d.pfx = p.out
	rep = d.pfx[sections[0][0] : sections[0][0]+sections[0][1]]
	def = d.pfx[sections[1][0] : sections[1][0]+sections[1][1]]
	return k, rep, def, true
}
