package change

import (
	"sync"

	"github.com/pingcap/tidb/pkg/parser/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
	"golang.org/x/text/transform"
)

// The binlog holds a text column's bytes in the column's charset. braid
// gives text as UTF-8 (Values, flat messages, canal entries), so a column
// of another charset is converted: latin1 by a fast path of its own (it is
// MySQL's and MariaDB's historical default), the others below by
// golang.org/x/text's decoders. utf8, utf8mb3, utf8mb4 and ascii need
// nothing; a charset neither here nor those (swe7, dec8, armscii8, ...) is
// passed through, invalid UTF-8 becoming U+FFFD.
var charsetDecoders = map[string]encoding.Encoding{
	"gbk":      simplifiedchinese.GBK,
	"gb2312":   simplifiedchinese.GBK, // GBK extends it
	"gb18030":  simplifiedchinese.GB18030,
	"big5":     traditionalchinese.Big5,
	"sjis":     japanese.ShiftJIS,
	"cp932":    japanese.ShiftJIS, // the WHATWG decoder is Windows-31J's
	"ujis":     japanese.EUCJP,
	"eucjpms":  japanese.EUCJP,
	"euckr":    korean.EUCKR,
	"latin2":   charmap.ISO8859_2,
	"latin5":   charmap.ISO8859_9,
	"latin7":   charmap.ISO8859_13,
	"greek":    charmap.ISO8859_7,
	"hebrew":   charmap.ISO8859_8,
	"cp1250":   charmap.Windows1250,
	"cp1251":   charmap.Windows1251,
	"cp1256":   charmap.Windows1256,
	"cp1257":   charmap.Windows1257,
	"cp850":    charmap.CodePage850,
	"cp852":    charmap.CodePage852,
	"cp866":    charmap.CodePage866,
	"koi8r":    charmap.KOI8R,
	"koi8u":    charmap.KOI8U,
	"macroman": charmap.Macintosh,
	"tis620":   charmap.Windows874, // a superset of TIS-620
	"ucs2":     unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM),
	"utf16":    unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM),
	"utf16le":  unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM),
	"utf32":    utf32.UTF32(utf32.BigEndian, utf32.IgnoreBOM),
}

// The TiDB parser, which braid's schema tracker reads DDL with, rejects
// the charsets TiDB does not implement ("Unknown character set: 'big5'")
// though it knows their names and collations; braid registers the ones it
// converts, so that a column's CHARACTER SET big5 reaches the model (the
// rewrite of DDL makes the charsets left unknown utf8mb4).
//
// It also makes each charset's pool of decoders.
func init() {
	for cs, enc := range charsetDecoders {
		if c, err := charset.GetCharsetInfo(cs); c != nil && err != nil {
			charset.AddCharset(c)
		}
		decoderPools[cs] = &sync.Pool{New: func() any { return enc.NewDecoder() }}
	}
}

// decoderPools hold each charset's decoders between values: a decoder has
// state, so a value takes one for the time it is converted (FlatWriters
// and canal sessions convert the same tables at once).
var decoderPools = map[string]*sync.Pool{}

// convertedCharset reports whether braid converts text of charset cs to
// UTF-8: what Column.Charset and Table.Charset hold.
func ConvertedCharset(cs string) bool {
	return cs == charsetLatin1 || charsetDecoders[cs] != nil
}

// appendConverted appends text x of charset cs (a convertedCharset) as
// UTF-8; bytes the charset does not map become U+FFFD.
func appendConverted(b []byte, cs string, x []byte) []byte {
	if cs == charsetLatin1 {
		return appendLatin1UTF8(b, x)
	}
	pool := decoderPools[cs]
	if pool == nil {
		return append(b, x...)
	}
	d := pool.Get().(*encoding.Decoder)
	out, _, err := transform.Append(d, b, x) // resets d first
	pool.Put(d)
	if err != nil {
		return append(b, x...) // not reached: the decoders replace what they cannot map
	}
	return out
}
