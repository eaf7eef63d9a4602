package daemon

import (
	"strings"
	"testing"

	cpupeer "github.com/lastmile/lastmile/peer"
)

// TestValidatePeersVerify: peers.verify is a share from 0 to 1; any
// other value is refused naming the key and saying what is allowed. Its
// default is peer.DefaultVerify, and its 0 (none) is a negative
// SpillerConfig.Verify, whose 0 is the default.
func TestValidatePeersVerify(t *testing.T) {
	const base = "roots: {ctr: /mnt/datasets/ctr}\npeers: {addrs: [\"127.0.0.1:7941\"], insecure: true, verify: %s}\n"
	f := func(v string, ok bool) {
		t.Helper()
		cfg, err := ParseConfig(strings.NewReader(strings.Replace(base, "%s", v, 1)))
		if err != nil {
			t.Fatalf("verify %s: %v", v, err)
		}
		err = cfg.Validate()
		if ok {
			if err != nil {
				t.Errorf("verify %s refused: %v", v, err)
			}
			return
		}
		if fields := configFields(err); len(fields) != 1 || fields[0] != "peers.verify" {
			t.Errorf("verify %s: errors %v name %v, want only peers.verify", v, err, fields)
		} else if !strings.Contains(err.Error(), "from 0 (none) to 1 (every one)") {
			t.Errorf("verify %s: %v does not say what is allowed", v, err)
		}
	}
	f("0", true)
	f("0.01", true)
	f("0.5", true)
	f("1", true)
	f("-0.1", false)
	f("1.5", false)
	f("2", false)
	f(".nan", false)
	f(".inf", false)

	if d := DefaultConfig().Peers.Verify; d != cpupeer.DefaultVerify {
		t.Errorf("default peers.verify %v, want %v", d, cpupeer.DefaultVerify)
	}
	for _, c := range []struct{ peers, spiller float64 }{{0, -1}, {0.01, 0.01}, {1, 1}} {
		if got := spillerVerify(c.peers); got != c.spiller {
			t.Errorf("peers.verify %v is SpillerConfig.Verify %v, want %v", c.peers, got, c.spiller)
		}
	}
}
