//! A price table the user supplies, for the cost of runs whose backend
//! reports tokens but no cost (the API adapters, Codex, Gemini CLI). The
//! engine applies it to a `done` that has a complete token report and no
//! cost of its own, for the model the backend named (`init`) or the run
//! asked for; the cost is marked [`CostSource::AccountEstimate`]. A reported
//! cost is never replaced, and without a price for the model the cost
//! stays absent.
//!
//! ```json
//! {
//!   "source": "https://openai.com/api/pricing, 2026-11-01",
//!   "models": {
//!     "gpt-4o": {"inputPerMTok": 2.5, "outputPerMTok": 10, "cacheReadPerMTok": 1.25},
//!     "claude-sonnet-4*": {"inputPerMTok": 3, "outputPerMTok": 15}
//!   }
//! }
//! ```
//!
//! Prices are US dollars per million tokens. A name ending in `*` prices
//! every model starting with the rest (the longest such prefix wins; an
//! exact name wins over any). Cache reads and writes cost the input price
//! unless the table says otherwise.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::{Cost, CostSource, TokenCoverage, TokenReport};

/// Prices per model, as the user wrote them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PriceTable {
    /// Where the prices come from (a page, a date), for people.
    #[serde(default)]
    pub source: Option<String>,
    /// Prices by model name (or `prefix*`).
    pub models: BTreeMap<String, ModelPrice>,
}

/// One model's prices, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelPrice {
    /// Input tokens not read from or written to the cache.
    pub input_per_m_tok: f64,
    /// Output tokens, reasoning included.
    pub output_per_m_tok: f64,
    /// Input tokens read from the cache (the input price when absent).
    #[serde(default)]
    pub cache_read_per_m_tok: Option<f64>,
    /// Input tokens written to the cache (the input price when absent).
    #[serde(default)]
    pub cache_write_per_m_tok: Option<f64>,
}

/// Why a price table was refused.
#[derive(Debug, thiserror::Error)]
pub enum PriceTableError {
    /// Not the JSON shape above.
    #[error("not a price table: {0}")]
    Shape(#[from] serde_json::Error),
    /// A price that is negative, infinite or not a number.
    #[error("the price of {model} is not a number of dollars ≥ 0")]
    BadPrice {
        /// The model whose price it is.
        model: String,
    },
}

impl PriceTable {
    /// Reads a table from its JSON text.
    pub fn from_json(text: &str) -> Result<Self, PriceTableError> {
        let table: PriceTable = serde_json::from_str(text)?;
        for (model, price) in &table.models {
            let prices = [
                Some(price.input_per_m_tok),
                Some(price.output_per_m_tok),
                price.cache_read_per_m_tok,
                price.cache_write_per_m_tok,
            ];
            if prices
                .into_iter()
                .flatten()
                .any(|p| !p.is_finite() || p < 0.0)
            {
                return Err(PriceTableError::BadPrice {
                    model: model.clone(),
                });
            }
        }
        Ok(table)
    }

    /// The price of `model`: its own entry, else the longest `prefix*`
    /// entry it matches.
    pub fn price(&self, model: &str) -> Option<&ModelPrice> {
        self.models.get(model).or_else(|| {
            self.models
                .iter()
                .filter_map(|(name, price)| Some((name.strip_suffix('*')?, price)))
                .filter(|(prefix, _)| model.starts_with(prefix))
                .max_by_key(|(prefix, _)| prefix.len())
                .map(|(_, price)| price)
        })
    }

    /// What `tokens` of `model` cost; `None` without a price for the model
    /// or with a partial token report (a cost from it would be too low).
    pub fn cost(&self, model: &str, tokens: &TokenReport) -> Option<Cost> {
        if tokens.coverage != TokenCoverage::Complete {
            return None;
        }
        let price = self.price(model)?;
        let read = tokens.input.cache_read.unwrap_or(0);
        let written = tokens.input.cache_write.unwrap_or(0);
        let fresh = tokens.input.total.saturating_sub(read + written);
        let dollars = fresh as f64 * price.input_per_m_tok
            + read as f64 * price.cache_read_per_m_tok.unwrap_or(price.input_per_m_tok)
            + written as f64 * price.cache_write_per_m_tok.unwrap_or(price.input_per_m_tok)
            + tokens.output.total as f64 * price.output_per_m_tok;
        Some(Cost {
            usd: dollars / 1_000_000.0,
            source: CostSource::AccountEstimate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{InputTokens, OutputTokens};

    fn tokens(input: u64, read: Option<u64>, output: u64) -> TokenReport {
        TokenReport {
            coverage: TokenCoverage::Complete,
            input: InputTokens {
                total: input,
                cache_read: read,
                cache_write: None,
            },
            output: OutputTokens {
                total: output,
                reasoning: None,
            },
        }
    }

    #[test]
    fn tokens_are_priced_per_million_with_cache_reads_at_their_own_price() {
        let table = PriceTable::from_json(
            r#"{"source": "test", "models": {
                "gpt-4o": {"inputPerMTok": 2.5, "outputPerMTok": 10, "cacheReadPerMTok": 1.25},
                "claude-*": {"inputPerMTok": 1, "outputPerMTok": 1},
                "claude-sonnet-*": {"inputPerMTok": 3, "outputPerMTok": 15}
            }}"#,
        )
        .unwrap();
        let cost = table
            .cost("gpt-4o", &tokens(1_000_000, Some(400_000), 100_000))
            .unwrap();
        // 600k fresh × 2.5 + 400k read × 1.25 + 100k out × 10 = 1.5 + 0.5 + 1.0
        assert!((cost.usd - 3.0).abs() < 1e-9, "{cost:?}");
        assert_eq!(cost.source, CostSource::AccountEstimate);
        let sonnet = table
            .cost("claude-sonnet-4-5", &tokens(1_000_000, None, 0))
            .unwrap();
        assert!((sonnet.usd - 3.0).abs() < 1e-9, "the longest prefix wins");
        assert!(
            table.cost("llama3", &tokens(10, None, 10)).is_none(),
            "no price, no cost"
        );
        let partial = TokenReport {
            coverage: TokenCoverage::Partial,
            ..tokens(10, None, 10)
        };
        assert!(
            table.cost("gpt-4o", &partial).is_none(),
            "never a cost too low"
        );
    }

    #[test]
    fn a_bad_table_is_refused_with_what_is_wrong() {
        let negative =
            PriceTable::from_json(r#"{"models": {"m": {"inputPerMTok": -1, "outputPerMTok": 1}}}"#);
        assert_eq!(
            negative.unwrap_err().to_string(),
            "the price of m is not a number of dollars ≥ 0"
        );
        let typo =
            PriceTable::from_json(r#"{"models": {"m": {"inputPerMtok": 1, "outputPerMTok": 1}}}"#);
        assert!(typo.unwrap_err().to_string().contains("inputPerMtok"));
        assert!(PriceTable::from_json("[]").is_err());
    }
}
