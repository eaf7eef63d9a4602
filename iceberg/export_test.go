package iceberg

// For the external tests (package iceberg_test), which build tables with
// icebergtest (an internal test cannot: icebergtest imports iceberg).
var (
	AvroBound    = avroBound
	ErrAvroBound = errAvroBound
)
