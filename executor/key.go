package executor

import (
	"fmt"
	"reflect"
)

// mayBeInvalid reports whether a key of type t can hold a float or
// complex number (a NaN is not equal to itself) or an interface (its
// dynamic type may not be hashable), decided once per executor: most key
// types need no check.
func mayBeInvalid(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.Interface:
		return true
	case reflect.Array:
		return mayBeInvalid(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if mayBeInvalid(t.Field(i).Type) {
				return true
			}
		}
	}
	return false // pointers and channels compare by address
}

// validate refuses a key that can never be serialised (see ErrInvalidKey).
// Every method taking a key calls it before anything is locked, reserved or
// counted: the router's map would panic on an unhashable key, and never find
// one not equal to itself.
func (e *Executor[K]) validate(key K) error {
	if !e.checkKeys {
		return nil
	}
	return validateKey(key)
}

// validateKey checks a key that may hold a NaN or an interface, containing
// the panic of == on a dynamic type that is not comparable.
func validateKey[K comparable](key K) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = invalidKey(key, fmt.Sprintf("it cannot be hashed (%v)", v))
		}
	}()
	if key != key {
		return invalidKey(key, "it is not equal to itself (it holds a NaN)")
	}
	return nil
}

func invalidKey(key any, why string) error {
	return fmt.Errorf("%w: a key of type %T: %s", ErrInvalidKey, key, why)
}

// validateAll validates every key of a DoMany.
func (e *Executor[K]) validateAll(keys []K) error {
	if !e.checkKeys {
		return nil
	}
	for _, k := range keys {
		if err := e.validate(k); err != nil {
			return err
		}
	}
	return nil
}

// dedupMaxScan is the most keys dedup compares pairwise; above, a set keeps
// DoMany linear in its keys.
const dedupMaxScan = 16

// dedup removes keys that share a mailbox (striped: a stripe), keeping first
// occurrences; valid keys (see validate) can key a map.
func (e *Executor[K]) dedup(keys []K) []K {
	out := make([]K, 0, len(keys))
	if len(keys) <= dedupMaxScan {
	next:
		for _, k := range keys {
			for _, o := range out {
				if e.router.Same(o, k) {
					continue next
				}
			}
			out = append(out, k)
		}
		return out
	}
	if e.router.Striped() {
		seen := make(map[int]struct{}, len(keys))
		for _, k := range keys {
			i := e.router.Index(k)
			if _, ok := seen[i]; !ok {
				seen[i] = struct{}{}
				out = append(out, k)
			}
		}
		return out
	}
	seen := make(map[K]struct{}, len(keys))
	for _, k := range keys {
		if _, ok := seen[k]; !ok {
			seen[k] = struct{}{}
			out = append(out, k)
		}
	}
	return out
}
