// SPDX-License-Identifier: Apache-2.0

// Package xdr stands in for the Stellar SDK's xdr package: LedgerCloseMeta with the two methods
// of the generated type that corestream's adapters and their tests call (see package sdkshape).
// The stub keeps the bytes it is given; it decodes nothing.
package xdr

// LedgerCloseMeta stands in for the SDK's generated union.
type LedgerCloseMeta struct {
	raw []byte
}

// UnmarshalBinary keeps a copy of inp (the SDK's decodes it; neither keeps inp).
func (s *LedgerCloseMeta) UnmarshalBinary(inp []byte) error {
	s.raw = append([]byte(nil), inp...)
	return nil
}

// MarshalBinary returns the bytes UnmarshalBinary kept (the SDK's encodes the value).
func (s LedgerCloseMeta) MarshalBinary() ([]byte, error) {
	return append([]byte(nil), s.raw...), nil
}
