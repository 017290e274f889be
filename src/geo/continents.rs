//! ISO 3166-1 alpha-2 country -> continent code (AF, AN, AS, EU, NA, OC, SA).
//!
//! Used when a database gives a country but no continent (flat schemas), so
//! continent rules still apply and the partition (RFC 7871 §7.2.1) merges
//! on the same decisions whichever database schema is loaded.
//!
//! The assignment follows GeoNames, which MaxMind's `continent.code` uses
//! (RU is EU, TR and the Caucasus AS, EG AF, PA NA). XK (Kosovo,
//! user-assigned) is included because databases use it.

/// Sorted by code for binary search.
#[rustfmt::skip]
const TABLE: &[(&str, &str)] = &[
    ("AD", "EU"), ("AE", "AS"), ("AF", "AS"), ("AG", "NA"), ("AI", "NA"), ("AL", "EU"),
    ("AM", "AS"), ("AO", "AF"), ("AQ", "AN"), ("AR", "SA"), ("AS", "OC"), ("AT", "EU"),
    ("AU", "OC"), ("AW", "NA"), ("AX", "EU"), ("AZ", "AS"),
    ("BA", "EU"), ("BB", "NA"), ("BD", "AS"), ("BE", "EU"), ("BF", "AF"), ("BG", "EU"),
    ("BH", "AS"), ("BI", "AF"), ("BJ", "AF"), ("BL", "NA"), ("BM", "NA"), ("BN", "AS"),
    ("BO", "SA"), ("BQ", "NA"), ("BR", "SA"), ("BS", "NA"), ("BT", "AS"), ("BV", "AN"),
    ("BW", "AF"), ("BY", "EU"), ("BZ", "NA"),
    ("CA", "NA"), ("CC", "AS"), ("CD", "AF"), ("CF", "AF"), ("CG", "AF"), ("CH", "EU"),
    ("CI", "AF"), ("CK", "OC"), ("CL", "SA"), ("CM", "AF"), ("CN", "AS"), ("CO", "SA"),
    ("CR", "NA"), ("CU", "NA"), ("CV", "AF"), ("CW", "NA"), ("CX", "OC"), ("CY", "EU"),
    ("CZ", "EU"),
    ("DE", "EU"), ("DJ", "AF"), ("DK", "EU"), ("DM", "NA"), ("DO", "NA"), ("DZ", "AF"),
    ("EC", "SA"), ("EE", "EU"), ("EG", "AF"), ("EH", "AF"), ("ER", "AF"), ("ES", "EU"),
    ("ET", "AF"),
    ("FI", "EU"), ("FJ", "OC"), ("FK", "SA"), ("FM", "OC"), ("FO", "EU"), ("FR", "EU"),
    ("GA", "AF"), ("GB", "EU"), ("GD", "NA"), ("GE", "AS"), ("GF", "SA"), ("GG", "EU"),
    ("GH", "AF"), ("GI", "EU"), ("GL", "NA"), ("GM", "AF"), ("GN", "AF"), ("GP", "NA"),
    ("GQ", "AF"), ("GR", "EU"), ("GS", "AN"), ("GT", "NA"), ("GU", "OC"), ("GW", "AF"),
    ("GY", "SA"),
    ("HK", "AS"), ("HM", "AN"), ("HN", "NA"), ("HR", "EU"), ("HT", "NA"), ("HU", "EU"),
    ("ID", "AS"), ("IE", "EU"), ("IL", "AS"), ("IM", "EU"), ("IN", "AS"), ("IO", "AS"),
    ("IQ", "AS"), ("IR", "AS"), ("IS", "EU"), ("IT", "EU"),
    ("JE", "EU"), ("JM", "NA"), ("JO", "AS"), ("JP", "AS"),
    ("KE", "AF"), ("KG", "AS"), ("KH", "AS"), ("KI", "OC"), ("KM", "AF"), ("KN", "NA"),
    ("KP", "AS"), ("KR", "AS"), ("KW", "AS"), ("KY", "NA"), ("KZ", "AS"),
    ("LA", "AS"), ("LB", "AS"), ("LC", "NA"), ("LI", "EU"), ("LK", "AS"), ("LR", "AF"),
    ("LS", "AF"), ("LT", "EU"), ("LU", "EU"), ("LV", "EU"), ("LY", "AF"),
    ("MA", "AF"), ("MC", "EU"), ("MD", "EU"), ("ME", "EU"), ("MF", "NA"), ("MG", "AF"),
    ("MH", "OC"), ("MK", "EU"), ("ML", "AF"), ("MM", "AS"), ("MN", "AS"), ("MO", "AS"),
    ("MP", "OC"), ("MQ", "NA"), ("MR", "AF"), ("MS", "NA"), ("MT", "EU"), ("MU", "AF"),
    ("MV", "AS"), ("MW", "AF"), ("MX", "NA"), ("MY", "AS"), ("MZ", "AF"),
    ("NA", "AF"), ("NC", "OC"), ("NE", "AF"), ("NF", "OC"), ("NG", "AF"), ("NI", "NA"),
    ("NL", "EU"), ("NO", "EU"), ("NP", "AS"), ("NR", "OC"), ("NU", "OC"), ("NZ", "OC"),
    ("OM", "AS"),
    ("PA", "NA"), ("PE", "SA"), ("PF", "OC"), ("PG", "OC"), ("PH", "AS"), ("PK", "AS"),
    ("PL", "EU"), ("PM", "NA"), ("PN", "OC"), ("PR", "NA"), ("PS", "AS"), ("PT", "EU"),
    ("PW", "OC"), ("PY", "SA"),
    ("QA", "AS"),
    ("RE", "AF"), ("RO", "EU"), ("RS", "EU"), ("RU", "EU"), ("RW", "AF"),
    ("SA", "AS"), ("SB", "OC"), ("SC", "AF"), ("SD", "AF"), ("SE", "EU"), ("SG", "AS"),
    ("SH", "AF"), ("SI", "EU"), ("SJ", "EU"), ("SK", "EU"), ("SL", "AF"), ("SM", "EU"),
    ("SN", "AF"), ("SO", "AF"), ("SR", "SA"), ("SS", "AF"), ("ST", "AF"), ("SV", "NA"),
    ("SX", "NA"), ("SY", "AS"), ("SZ", "AF"),
    ("TC", "NA"), ("TD", "AF"), ("TF", "AN"), ("TG", "AF"), ("TH", "AS"), ("TJ", "AS"),
    ("TK", "OC"), ("TL", "OC"), ("TM", "AS"), ("TN", "AF"), ("TO", "OC"), ("TR", "AS"),
    ("TT", "NA"), ("TV", "OC"), ("TW", "AS"), ("TZ", "AF"),
    ("UA", "EU"), ("UG", "AF"), ("UM", "OC"), ("US", "NA"), ("UY", "SA"), ("UZ", "AS"),
    ("VA", "EU"), ("VC", "NA"), ("VE", "SA"), ("VG", "NA"), ("VI", "NA"), ("VN", "AS"),
    ("VU", "OC"),
    ("WF", "OC"), ("WS", "OC"),
    ("XK", "EU"),
    ("YE", "AS"), ("YT", "AF"),
    ("ZA", "AF"), ("ZM", "AF"), ("ZW", "AF"),
];

/// Continent code for an upper-case alpha-2 country code.
pub fn continent_of(country: &str) -> Option<&'static str> {
    TABLE
        .binary_search_by(|(c, _)| (*c).cmp(country))
        .ok()
        .map(|i| TABLE[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_complete() {
        assert!(TABLE.windows(2).all(|w| w[0].0 < w[1].0));
        // 249 ISO 3166-1 codes plus XK.
        assert_eq!(TABLE.len(), 250);
        let valid = ["AF", "AN", "AS", "EU", "NA", "OC", "SA"];
        assert!(TABLE.iter().all(|(_, k)| valid.contains(k)));
    }

    #[test]
    fn lookups() {
        assert_eq!(continent_of("US"), Some("NA"));
        assert_eq!(continent_of("DE"), Some("EU"));
        assert_eq!(continent_of("JP"), Some("AS"));
        assert_eq!(continent_of("BR"), Some("SA"));
        assert_eq!(continent_of("AU"), Some("OC"));
        assert_eq!(continent_of("ZA"), Some("AF"));
        assert_eq!(continent_of("AQ"), Some("AN"));
        assert_eq!(continent_of("ZZ"), None);
    }
}
