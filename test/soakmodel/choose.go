package soakmodel

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// Config is a soak's knobs, read from the environment (ReadConfig).
type Config struct {
	// Seed: the same seed makes the same choices; which operation ends
	// first, and so the interleaving, follows timing.
	Seed       uint64
	Duration   time.Duration // of chaos; 0 skips the soak
	KillEvery  time.Duration // the mean time between kills
	CheckEvery time.Duration
	Deadline   time.Duration // an operation's: past it, it is stuck
}

// ReadConfig reads prefix+SEED, prefix+DURATION, prefix+KILL_EVERY,
// prefix+CHECK_EVERY and deadlineVar (getenv: os.Getenv) over def; the
// seed defaults to the clock.
func ReadConfig(getenv func(string) string, prefix, deadlineVar string, def Config) (Config, error) {
	c := def
	c.Seed = uint64(time.Now().UnixNano())
	if s := getenv(prefix + "SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return c, fmt.Errorf("%sSEED=%q: %w", prefix, s, err)
		}
		c.Seed = n
	}
	for env, d := range map[string]*time.Duration{prefix + "DURATION": &c.Duration, prefix + "KILL_EVERY": &c.KillEvery,
		prefix + "CHECK_EVERY": &c.CheckEvery, deadlineVar: &c.Deadline} {
		if s := getenv(env); s != "" {
			v, err := time.ParseDuration(s)
			if err != nil || v < 0 || (v == 0 && env != prefix+"DURATION") {
				return c, fmt.Errorf("%s=%q: want a positive duration", env, s)
			}
			*d = v
		}
	}
	return c, nil
}

// KillDelay is the time to the next kill: exponential around the mean, as
// independent failures come, within a tenth and three times the mean.
func (c Config) KillDelay(r *rand.Rand) time.Duration {
	d := time.Duration(r.ExpFloat64() * float64(c.KillEvery))
	return min(max(d, c.KillEvery/10), 3*c.KillEvery)
}

// NewRand is a soak's source of choices. ChaCha8, not PCG: PCG seeded
// with small numbers (1, 2, 3...) starts with much the same outputs, so
// seeds 1 and 2 made the same first choices.
func NewRand(seed uint64) *rand.Rand {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	return rand.New(rand.NewChaCha8(key))
}

// Sources gives sources of their own (a worker's, the killer's), each
// drawn from the seed's, in the order asked for.
func Sources(seed uint64) func() *rand.Rand {
	seeds := NewRand(seed)
	return func() *rand.Rand {
		var key [32]byte
		for i := 0; i < len(key); i += 8 {
			binary.LittleEndian.PutUint64(key[i:], seeds.Uint64())
		}
		return rand.New(rand.NewChaCha8(key))
	}
}

// Choice is a kind of operation with its weight (0: not allowed now).
type Choice struct {
	Weight int
	Do     func()
}

// When is w where allowed, else 0.
func When(allowed bool, w int) int {
	if allowed {
		return w
	}
	return 0
}

// Pick runs one of cs at random by weight; false when none is allowed.
func Pick(r *rand.Rand, cs []Choice) bool {
	total := 0
	for _, c := range cs {
		total += max(c.Weight, 0)
	}
	if total == 0 {
		return false
	}
	n := r.IntN(total)
	for _, c := range cs {
		if c.Weight <= 0 {
			continue
		}
		if n -= c.Weight; n < 0 {
			c.Do()
			return true
		}
	}
	return false
}

// One is one of items at random.
func One[T any](r *rand.Rand, items []T) T { return items[r.IntN(len(items))] }
