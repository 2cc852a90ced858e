//! Reading Browser Use histories of every layout, and the errors of bad ones.

use super::*;
use serde_json::json;

fn parse(v: Value) -> Result<ParsedHistory, ImportError> {
    parse_history(&v, Path::new("h.json"))
}

#[test]
fn nested_layout_and_memory_shift() {
    let h = parse(json!({"history": [
        {"model_output": {"current_state": {"evaluation_previous_goal": "Start", "memory": "m1", "next_goal": "open"},
          "action": [{"go_to_url": {"url": "https://a.test"}}]},
         "result": [{"is_done": false}], "state": {"url": "about:blank", "title": "", "tabs": [{"page_id": 0, "url": "about:blank", "title": ""}]}},
        {"model_output": {"current_state": {"evaluation_previous_goal": "ok", "memory": "m2", "next_goal": "finish"},
          "action": [{"done": {"text": "42", "success": true}}]},
         "result": [{"is_done": true, "success": true, "extracted_content": "42"}], "state": {"url": "https://a.test", "title": "A"}}
    ]}))
    .unwrap();
    assert_eq!(h.steps[0].output.actions[0].name, "navigate");
    assert_eq!(h.steps[0].state.memory, "");
    assert_eq!(h.steps[1].state.memory, "m1");
    assert_eq!(h.steps[1].output.memory, "m2");
    assert_eq!(h.steps[0].state.tabs[0].id, "0");
    assert_eq!(
        h.done,
        Some(DoneInfo {
            success: Some(true),
            text: Some("42".into())
        })
    );
}

#[test]
fn errors_name_item_and_field() {
    let e = parse(json!({"history": [{"model_output": null, "result": [], "state": {"url": 5}}]}))
        .unwrap_err();
    assert_eq!(e.location, "history[0]");
    assert_eq!(e.field, "state.url");
    let e = parse(
        json!({"history": [{"model_output": null, "result": [], "state": {"screenshot": "@@@"}}]}),
    )
    .unwrap_err();
    assert_eq!(e.field, "state.screenshot");
    let e = parse(json!({"history": [{"model_output": null, "state": {}}]})).unwrap_err();
    assert_eq!(e.field, "result");
}

#[test]
fn interacted_elements_take_the_action_index_when_they_have_none() {
    let h = parse(json!({"history": [{
        "model_output": {"action": [{"navigate": {"url": "https://a.test"}}, {"click": {"index": 9}}]},
        "result": [],
        "state": {"url": "https://a.test", "interacted_element": [null, {
            "node_id": 5, "backend_node_id": 6, "frame_id": null, "node_type": 1, "node_value": "",
            "node_name": "BUTTON", "attributes": {"type": "submit"}, "x_path": "html/body/button",
            "element_hash": 1, "ax_name": "Log in", "bounds": {"x": 1.0, "y": 2.0, "width": 3.0, "height": 4.0}}]}
    }]}))
    .unwrap();
    let e = h.steps[0].state.element(9).unwrap();
    assert_eq!(
        (e.tag.as_str(), e.role.as_str(), e.text.as_str()),
        ("button", "button", "Log in")
    );
    assert_eq!(e.bbox, [1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn null_padded_action_objects_and_unknown_names() {
    let h = parse(json!({"history": [{"model_output": {"action": [
        {"click_element": {"index": 3}, "input_text": null},
        {"hover_element": {"index": 4}}
    ]}, "result": [], "state": {}}]}))
    .unwrap();
    assert_eq!(h.steps[0].output.actions[0].name, "click");
    assert_eq!(h.steps[0].output.actions[1].name, "hover_element");
    assert_eq!(h.warnings.len(), 1);
    assert!(h.done.is_none());
}
