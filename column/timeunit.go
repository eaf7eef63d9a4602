package column

import "fmt"

// UnitName names a timestamp unit of unit nanoseconds ("microseconds";
// a DATE's is a day), for messages.
func UnitName(unit int64) string {
	switch unit {
	case 1:
		return "nanoseconds"
	case 1e3:
		return "microseconds"
	case 1e6:
		return "milliseconds"
	case 1e9:
		return "seconds"
	case 86400e9:
		return "days"
	}
	return fmt.Sprintf("units of %d ns", unit)
}
