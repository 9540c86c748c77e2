package v1alpha1

import (
	"slices"

	"carve.dev/carve/driver/volume"
)

// WriteCache is a dm-writecache in front of a thick LV (volume.WriteCache).
type WriteCache struct {
	// SizeBytes is the cache's size.
	// +kubebuilder:validation:Minimum=1
	SizeBytes int64 `json:"sizeBytes"`
	// PVs are the fast PVs of the VG it goes on: paths, or "@tag" for the
	// PVs with that lvm2 tag.
	// +kubebuilder:validation:MinItems=1
	PVs []string `json:"pvs"`
}

// WriteCacheOf is c as a resource holds it: nil for no cache.
func WriteCacheOf(c *volume.WriteCache) *WriteCache {
	if c == nil || c.Size == 0 {
		return nil
	}
	return &WriteCache{SizeBytes: int64(min(c.Size, 1<<62)), PVs: slices.Clone(c.On)}
}

// Volume is c as Carve's volumes take it: size 0 for none.
func (c *WriteCache) Volume() *volume.WriteCache {
	if c == nil || c.SizeBytes <= 0 {
		return &volume.WriteCache{}
	}
	return &volume.WriteCache{Size: uint64(c.SizeBytes), On: slices.Clone(c.PVs)}
}

// Same tells two caches alike (nil for none).
func (c *WriteCache) Same(o *WriteCache) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.SizeBytes == o.SizeBytes && slices.Equal(c.PVs, o.PVs)
}
