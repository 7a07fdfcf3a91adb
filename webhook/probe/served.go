package probe

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"github.com/webhook-guard/webhook-guard/webhook/servedchain"
)

// Served keeps what each guarded entry's endpoints served at the last
// probe round, so that admission can tell a writer, without a network
// call, that the caBundle it writes does not verify it. Each entry holds a
// reference per endpoint to the chain that address served; a chain is kept
// once per round however many entries call its address, and a round keeps
// at most Prober.MaxRoundBytes of them, replaced whole every round. Safe
// for concurrent use.
type Served struct {
	mu    sync.RWMutex
	byKey map[Key]servedPath
	// verdicts memoizes Check for this round's chains: admission checks
	// the same bundle against the same chains on every write of an entry
	// (a cainjector merge writes every entry), and parsing the bundle and
	// verifying the chain cost far more than the decision itself.
	verdicts map[verdictKey]verdict
}

// verdictKey names one check: the entry and the bundle's digest.
type verdictKey struct {
	key    Key
	bundle [sha256.Size]byte
}

// verdict is one check's answer.
type verdict struct {
	verified bool
	detail   string
}

// maxVerdicts bounds the memoized checks of a round; past it the memo
// starts over (writers choose the bundles).
const maxVerdicts = 4096

// servedPath is what one entry's endpoints served.
type servedPath struct {
	serverName string
	endpoints  []servedAt
}

// servedAt is one endpoint's chain (shared with the other entries that
// call the address).
type servedAt struct {
	addr  string
	chain *servedchain.Chain
}

// Store replaces the chains with a round's: an entry no longer probed,
// whose ready endpoints were not all probed, did not all answer or were not
// all kept (cut short, over the round's budget) is forgotten: admission
// judges a write on what every endpoint kube-apiserver may call served, or
// not at all.
func (s *Served) Store(results []Result) {
	next := make(map[Key]servedPath, len(results))
	for _, res := range results {
		if len(res.served) > 0 {
			next[res.Path.Key()] = servedPath{serverName: res.Path.serverName(), endpoints: res.served}
		}
	}
	s.mu.Lock()
	s.byKey, s.verdicts = next, nil
	s.mu.Unlock()
}

// Check verifies what key's endpoints served at the last round against
// caBundle, as kube-apiserver would with that bundle, at now. verified is
// false only when the bundle verifies what no endpoint served: every
// endpoint kube-apiserver may call would fail, so one endpoint a
// non-writer got into the Service's endpoints cannot make the owner's
// write fail (the round's series and report still show it). known is
// false when the last round kept nothing for key; detail names the reason
// and the endpoint when the bundle does not verify.
func (s *Served) Check(key Key, caBundle []byte, now time.Time) (verified, known bool, detail string) {
	if s == nil {
		return false, false, ""
	}
	vk := verdictKey{key: key, bundle: sha256.Sum256(caBundle)}
	s.mu.RLock()
	p, ok := s.byKey[key]
	v, memoized := s.verdicts[vk]
	s.mu.RUnlock()
	if !ok {
		return false, false, ""
	}
	if !memoized {
		v = p.check(caBundle, now)
		s.mu.Lock()
		if s.verdicts == nil || len(s.verdicts) >= maxVerdicts {
			s.verdicts = map[verdictKey]verdict{}
		}
		s.verdicts[vk] = v
		s.mu.Unlock()
	}
	return v.verified, true, v.detail
}

// check verifies what p's endpoints served against caBundle at now: it
// verifies when what any endpoint served verifies.
func (p servedPath) check(caBundle []byte, now time.Time) verdict {
	roots, err := servedchain.RootsOf(caBundle)
	if err != nil {
		return verdict{detail: fmt.Sprintf("%s: %v", ReasonNoCABundle, err)}
	}
	first := ""
	for _, e := range p.endpoints {
		// The reason, not Go's error text: the detail goes into a warning
		// kubectl prints, which kube-apiserver cuts at 256 characters.
		res := roots.Verify(*e.chain, p.serverName, now)
		if res.Verified() {
			return verdict{verified: true}
		}
		if first == "" {
			first = fmt.Sprintf("%s at %s", res.Reason, boundText(e.addr, maxWhereText))
			if res.SystemRoots {
				first += " against the system roots (the caBundle is empty)"
			}
		}
	}
	if n := len(p.endpoints); n > 1 {
		first = fmt.Sprintf("%s and at every other of its %d endpoints", first, n)
	}
	return verdict{detail: fmt.Sprintf("%s for %s", first, boundText(p.serverName, maxWhereText))}
}

// Chains are what `check --served-chain` says an object's entries serve:
// chains read from files, by entry name ("" for every entry). A write is
// checked against them as Served checks it against a probe round's, for
// the server name of the endpoint the write sets (there was no round to
// take one from). The zero value holds none.
type Chains struct {
	byEntry map[string][]servedAt
}

// Add reads a chain (PEM, leaf first) as what entry's endpoint serves
// ("" for every entry), named where in the detail of a failed check. The
// chain is kept within the prober's bounds, as a handshake's is.
func (c *Chains) Add(entry, where string, pemChain []byte) error {
	chain, err := servedchain.ParsePEM(pemChain)
	if err != nil {
		return err
	}
	if c.byEntry == nil {
		c.byEntry = map[string][]servedAt{}
	}
	c.byEntry[entry] = append(c.byEntry[entry], servedAt{addr: where, chain: &chain})
	return nil
}

// Check verifies what entry serves against caBundle, as Served.Check does,
// for the server name of endpoint: verified when any chain verifies; known
// is false when no chain is the entry's.
func (c *Chains) Check(entry string, endpoint servedchain.Endpoint, caBundle []byte, now time.Time) (verified, known bool, detail string) {
	p := servedPath{serverName: endpoint.ServerName()}
	p.endpoints = append(append(p.endpoints, c.byEntry[""]...), c.byEntry[entry]...)
	if len(p.endpoints) == 0 {
		return false, false, ""
	}
	v := p.check(caBundle, now)
	return v.verified, true, v.detail
}
