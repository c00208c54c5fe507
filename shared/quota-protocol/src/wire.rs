//! Amounts, formats and operations as the quota protocol carries them (`proto/quota_state.proto`).

use admission_compat::go::QuantityFormat;
use admission_compat::resources::{Amount, NANO_PER_MILLI};

use crate::proto;

/// The print format of a wire code, or `None` for an unknown code.
fn format_of(code: u32) -> Option<QuantityFormat> {
    match code {
        0 => Some(QuantityFormat::DecimalSI),
        1 => Some(QuantityFormat::BinarySI),
        2 => Some(QuantityFormat::DecimalExponent),
        _ => None,
    }
}

/// The wire code of a format.
pub fn format_code(f: QuantityFormat) -> u32 {
    match f {
        QuantityFormat::DecimalSI => 0,
        QuantityFormat::BinarySI => 1,
        QuantityFormat::DecimalExponent => 2,
    }
}

/// An amount on the wire: its thousandths rounded away from zero (`milli` plus `milli_high` ×
/// 2^64) and the billionths that rounding hides (`sub_milli_nano`; see `Amount` in the proto).
/// Exact for every amount within the kit's bound (`resources::MAX_NANO`, 2^126), that is every
/// exact amount; the arithmetic wraps only far outside it.
pub fn wire_amount(a: &Amount) -> proto::Amount {
    let milli = a.milli();
    let low = milli as i64; // the low 64 bits, read as signed
    proto::Amount {
        milli: low,
        milli_high: (milli.wrapping_sub(i128::from(low)) >> 64) as i64,
        format: format_code(a.format),
        // |rest| < 10^6: fits.
        sub_milli_nano: a.nano.wrapping_sub(milli.wrapping_mul(NANO_PER_MILLI)) as i32,
    }
}

/// An amount from the wire, or why it is not one.
pub fn amount_of_wire(resource: &str, a: &proto::Amount) -> Result<Amount, String> {
    let format = format_of(a.format)
        .ok_or_else(|| format!("{resource}: unknown quantity format {}", a.format))?;
    if i128::from(a.sub_milli_nano).abs() >= NANO_PER_MILLI {
        return Err(format!(
            "{resource}: sub_milli_nano {} is not between -999999 and 999999",
            a.sub_milli_nano
        ));
    }
    let nano = (i128::from(a.milli_high) << 64)
        .checked_add(i128::from(a.milli))
        .and_then(|m| m.checked_mul(NANO_PER_MILLI))
        .and_then(|n| n.checked_add(i128::from(a.sub_milli_nano)))
        .ok_or_else(|| format!("{resource}: amount out of range"))?;
    Ok(Amount { nano, format })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_cross_the_wire_exactly() {
        for nano in [
            0,
            1,
            -1,
            500_000,
            -500_000,
            999_999,
            1_000_001,
            i128::from(i64::MAX),
            i128::from(i64::MAX) + 1,
            i128::from(i64::MIN) - 1,
            1 << 100,
            -(1 << 100),
            1 << 126,
            -(1 << 126),
        ] {
            let a = Amount {
                nano,
                format: QuantityFormat::BinarySI,
            };
            assert_eq!(amount_of_wire("cpu", &wire_amount(&a)), Ok(a), "{nano}");
        }
        // A value below 2^63 thousandths is one plain int64, as any caller would write it; so
        // is a negative.
        let w = wire_amount(&Amount::from_milli(-5000, QuantityFormat::DecimalSI));
        assert_eq!((w.milli, w.milli_high, w.sub_milli_nano), (-5000, 0, 0));
        assert!(amount_of_wire("cpu", &proto::Amount { format: 7, ..w }).is_err());
        let edge = proto::Amount {
            milli: -1,
            milli_high: i64::MIN,
            format: 0,
            sub_milli_nano: 0,
        };
        assert_eq!(
            amount_of_wire("cpu", &edge),
            Err("cpu: amount out of range".into())
        );
        let rest = proto::Amount {
            milli: 1,
            sub_milli_nano: -1_000_000,
            ..Default::default()
        };
        assert!(amount_of_wire("cpu", &rest).is_err());
    }

    /// Across a rolling upgrade: a peer built before `sub_milli_nano` reads the rounded
    /// thousandths (Go's MilliValue, what it always counted); an amount from such a peer reads
    /// as its thousandths.
    #[test]
    fn sub_milli_amounts_and_older_peers() {
        let a = Amount {
            nano: 500_000, // 500u
            format: QuantityFormat::DecimalSI,
        };
        let w = wire_amount(&a);
        assert_eq!((w.milli, w.milli_high, w.sub_milli_nano), (1, 0, -500_000));
        let old = proto::Amount {
            milli: 1500,
            ..Default::default()
        };
        assert_eq!(amount_of_wire("cpu", &old).unwrap().nano, 1_500_000_000);
        let minus = wire_amount(&Amount {
            nano: -1,
            format: QuantityFormat::DecimalSI,
        });
        assert_eq!((minus.milli, minus.sub_milli_nano), (-1, 999_999));
    }
}
