//! The OpenEnv track's model and recipe, as the registry binds them: the assignment carries both.

use crate::invalid::Invalid;
use serde_json::{json, Value};

use super::Registry;
use crate::openenv::assignment::TRACK_METHOD;

impl Registry {
    /// The model and the recipe's numbers, from the registry: `(model, recipe)`.
    pub fn openenv_track_recipe(&self) -> Result<(Value, Value), Invalid> {
        let method = self
            .methods
            .get(TRACK_METHOD)
            .ok_or_else(|| format!("the registry has no recipe `{TRACK_METHOD}`"))?;
        let challenge = self
            .challenges
            .iter()
            .find(|c| c.spec.challenge.method == TRACK_METHOD)
            .ok_or_else(|| format!("no challenge of the registry trains with `{TRACK_METHOD}`"))?;
        let model = self
            .models
            .get(&challenge.spec.challenge.model)
            .ok_or_else(|| format!("the registry has no model `{}`", challenge.spec.challenge.model))?;
        let t = &method.training;
        let recipe = json!({
            "method": TRACK_METHOD,
            "placeholder": method.method.placeholder,
            // GRPOConfig.learning_rate, LoraConfig.r / lora_alpha / lora_dropout, GRPOConfig.max_steps.
            "learning_rate": t.learning_rate,
            "lora_r": t.lora_rank,
            "lora_alpha": t.lora_alpha,
            "lora_dropout": t.lora_dropout.unwrap_or(0.0),
            "max_steps": t.max_steps,
        });
        Ok((json!({"repo": model.model.repo, "revision": model.model.revision}), recipe))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_track_trains_the_registrys_model_with_its_recipe() {
        let files = crate::registry::shipped_files();
        let registry = Registry::load(&files, &[]).unwrap();
        let (model, recipe) = registry.openenv_track_recipe().unwrap();
        assert_eq!(model["repo"], "Qwen/Qwen3.5-9B");
        assert_eq!(recipe["method"], TRACK_METHOD);
        let method = &registry.methods[TRACK_METHOD].training;
        assert_eq!(recipe["lora_r"], method.lora_rank);
        assert_eq!(recipe["max_steps"], method.max_steps);
        assert_eq!(recipe["learning_rate"], method.learning_rate);
    }
}
