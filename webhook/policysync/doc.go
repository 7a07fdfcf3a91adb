// Package policysync keeps policy mode's generated objects (policy/vap) in
// step with the owner mappings and the owners' CA sources: the leader
// re-resolves every CA each interval and whenever the configuration reloads,
// and writes an object only when the desired one differs semantically from
// the live one, so that an unchanged cluster costs reads and never a write.
package policysync
